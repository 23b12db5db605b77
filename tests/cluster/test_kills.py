"""kill -9 on a standalone cluster under the spark engine: a worker lost in the middle of a
micro-batch (Spark runs its tasks again on the other worker, from the checkpointed state), and,
with the run folder on the S3 server, the driver dying after a sink commit, between two
micro-batches and in the batch step (then the steps again): each ends with the sink, the
intermediate stage and the verdict of an undisturbed run.

The query is the chaos test's two stages, deduplication keeping the last row per key and then
COUNT(DISTINCT): both keep keyed state on the executors. The undisturbed run is the local
engine's on a local master, beside the cluster run (the engines' sinks are equal row for row:
tests/cluster/test_standalone.py, tests/integration/test_spark_engine.py).

Slow (a cluster, six runs on it, about six minutes), and run by CI."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobs.stream.handler import FAULT_AFTER_COMMIT
from tests.chaos.test_kills import TABLES, committed_batches, dedup_then_distinct_spec
from tests.integration.conftest import table_rows
from tests.integration.test_cli import start_lockstep
from tests.support.delta_orders import store_options
from tests.support.standalone_cluster import StandaloneCluster
from tests.support.store_client import store_client

pytestmark = pytest.mark.slow

ROWS = 12  # six micro-batches per stage: room to kill inside the run, seconds each on the cluster
TIMEOUT = 900
STAGES = TABLES["dedup_then_distinct"]  # the sink and the first stage's table


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    return dedup_then_distinct_spec(tmp_path_factory.mktemp("query"), rows=ROWS)


@pytest.fixture(scope="module")
def undisturbed(spec, tmp_path_factory):
    """The undisturbed run's outcome, computed once, beside the first test's cluster run (on two
    cores the two finish sooner together than one after the other)."""
    out = tmp_path_factory.mktemp("undisturbed")
    run = start_run(spec, out)
    done: list[tuple] = []

    def result() -> tuple:
        if not done:
            finished(run)
            done.append(outcome(out))
        return done[0]

    yield result
    if run.poll() is None:
        run.kill()
        run.wait()


def start_run(spec: Path, out: Path, *options: str) -> subprocess.Popen:
    """`lockstep run` (stream, batch, check) in the background."""
    return start_lockstep("run", spec, "--out", out, "--quiet", *options)


def finished(run: subprocess.Popen) -> None:
    assert run.wait(TIMEOUT) == 0, run.stderr.read()


def outcome(out: Path) -> tuple:
    """The verdict and every table's rows."""
    verdict = json.loads((out / "q" / "report.json").read_text())["verdict"]
    return verdict, [table_rows(out / table) for table in STAGES]


def wait_for(condition, run: subprocess.Popen, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert run.poll() is None, f"the run ended before {what}: {run.stderr.read()}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.05)


def batches_in_flight(out: Path) -> int:
    """Micro-batches whose offsets are written and whose commit is not, over the stages."""
    return sum(
        len(list(checkpoint.glob("offsets/[0-9]*"))) - len(list(checkpoint.glob("commits/[0-9]*")))
        for checkpoint in out.glob("**/_state/checkpoint")
    )


def tasks_started(cluster: StandaloneCluster, worker: int) -> int:
    return sum(log.read_text(errors="replace").count("Running task") for log in cluster.executor_logs(worker))


def test_on_the_store_a_crash_after_a_sink_commit_a_kill_mid_stream_and_one_in_the_batch_step_change_nothing(
    cluster, spec, undisturbed, s3_server, shared_bucket, tmp_path
):
    """The run folder on the S3 server (Spark's checkpoints and tables at its keys, lockstep's
    files committed from the driver's working copy). The driver dies three times: right after a
    sink commit, before Spark records the micro-batch; by kill -9 between two micro-batches of a
    rerun; and by kill -9 in the batch step. Each rerun goes on from what the store holds, and the
    last ends with the undisturbed run's verdict and tables."""
    env, runs = s3_server.environment(), f"s3a://{shared_bucket}/cluster-kills"
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"store:\n  work_dir: {tmp_path / 'work'}\n  lease_seconds: 2\n")

    def step(command: str, fault: dict | None = None) -> subprocess.Popen:
        options = ("--out", runs, "--settings", settings, "--master", cluster.url, "--quiet")
        return start_lockstep(command, spec, *options, env={**env, **(fault or {})})

    crashed = step("stream", {FAULT_AFTER_COMMIT: "2"})
    assert crashed.wait(TIMEOUT) == 70, crashed.stderr.read()
    done_before = store_commits(s3_server, shared_bucket)
    time.sleep(2.5)  # the crashed writer's lease lapses by itself
    killed = step("stream")
    wait_for(lambda: store_commits(s3_server, shared_bucket) >= done_before + 2, killed, "two more commits")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    time.sleep(2.5)
    assert step("stream").wait(TIMEOUT) == 0
    batch = step("batch")
    wait_for(lambda: list((tmp_path / "work").glob("**/logs/q.spark.log")), batch, "the batch step's JVM")
    batch.send_signal(signal.SIGKILL)
    batch.wait()
    time.sleep(2.5)
    finished(step("run"))
    options = store_options(env)
    with store_client(s3_server) as store:
        verdict = json.loads(store.get(shared_bucket, "cluster-kills/q/report.json") or b"{}").get("verdict")
    tables = [table_rows(f"s3://{shared_bucket}/cluster-kills/{table}", options) for table in STAGES]
    assert (verdict, tables) == undisturbed()
    assert undisturbed()[0] == "pass"


def store_commits(server, bucket: str) -> int:
    """Micro-batches Spark recorded as done in the checkpoints on the store, over the stages."""
    with store_client(server) as store:
        keys = [item.key for item in store.list(bucket, "cluster-kills/")]
    return sum(1 for key in keys if "/_state/checkpoint/commits/" in key and key.rsplit("/", 1)[1].isdigit())


def test_a_worker_lost_in_the_middle_of_a_micro_batch_changes_nothing(cluster, spec, undisturbed, tmp_path):
    # Last in the module: the cluster goes on with one worker.
    run = start_run(spec, tmp_path / "killed", "--master", cluster.url)
    out = tmp_path / "killed"
    wait_for(lambda: committed_batches(out) >= 2 and batches_in_flight(out) > 0, run, "micro-batch after two")
    started = tasks_started(cluster, 1)
    wait_for(lambda: tasks_started(cluster, 1) > started, run, "task on worker 1", timeout=60)
    cluster.kill_worker(1)
    finished(run)
    assert cluster.alive_workers() == 1
    driver_log = (out / "logs" / "q.spark.log").read_text(errors="replace")
    assert "Lost executor" in driver_log  # the tasks it had ran again on worker 0
    assert outcome(out) == undisturbed()
