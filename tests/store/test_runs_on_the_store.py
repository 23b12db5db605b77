"""`lockstep run --out s3a://…` against a real S3 server (SeaweedFS): the same tables and verdicts
as a local run folder, a rerun from a working copy made anew from the store, kill -9 mid-stream,
the store going away mid-run, wrong credentials and a second writer."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.cli.local_store import LocalS3Server
from jobs.store.lease import Lease
from jobs.store.url import StoreUrl
from tests.chaos.test_kills import committed_batches, dedup_then_distinct_spec, tables_and_feeds
from tests.conftest import ROOT, change, orders_spec, write_changelog
from tests.integration.test_cli import start_lockstep
from tests.support.delta_orders import store_options, write_orders_table
from tests.support.store_client import store_client

pytestmark = pytest.mark.slow

TWO_STAGE = ("q/stream", "q/stages/stage1_dedup/stream")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The two-stage query over 12 changes (6 micro-batches per stage), run once on local disk:
    what the interrupted runs on the store must end with. Returns (its spec, its runs folder)."""
    folder = tmp_path_factory.mktemp("clean")
    spec = dedup_then_distinct_spec(folder / "spec", rows=12)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli.main", "run", str(spec), "--out", str(folder / "runs"), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return spec, folder / "runs"


def _settings(folder: Path, lease_seconds: int = 60) -> Path:
    path = folder / "settings.yaml"
    path.write_text(f"store:\n  work_dir: {folder / 'work'}\n  lease_seconds: {lease_seconds}\n")
    return path


def _lockstep(command: str, spec: Path, out: str | Path, settings: Path, env: dict) -> subprocess.Popen:
    return start_lockstep(command, spec, "--out", out, "--settings", settings, "--quiet", env=env)


def _finish(process: subprocess.Popen) -> int:
    out, err = process.communicate(timeout=600)
    assert process.returncode in (0, 1), err
    return process.returncode


def _store_tables(server: LocalS3Server, url: str, tables: tuple[str, ...]) -> dict:
    """The run folder's tables as anyone reads them from the store (delta-rs, no working copy)."""
    return tables_and_feeds(url, tables, store_options(server.environment()))


def _verdict_on_store(store, bucket: str, key: str) -> str:
    return json.loads(store.get(bucket, key))["verdict"]


def test_a_two_stage_run_and_its_rerun_from_a_new_working_copy_equal_the_local_ones(
    s3_server, bucket, prefix, store, tmp_path
):
    spec = dedup_then_distinct_spec(tmp_path / "spec", rows=6)  # three micro-batches per stage
    settings, url, local = _settings(tmp_path), f"s3a://{bucket}/{prefix}", tmp_path / "local"
    env = s3_server.environment()
    for round_ in (1, 2):
        if round_ == 2:  # more changes, and a host that has never seen the run folder
            write_changelog(tmp_path / "spec" / "shipments", "002.json", [{"order_id": 3, "company": "c", "seq": 99}])
            shutil.rmtree(tmp_path / "work")
        command = "stream" if round_ == 1 else "run"  # the check once, at the end
        on_store, on_disk = _lockstep(command, spec, url, settings, env), _lockstep(command, spec, local, settings, env)
        assert _finish(on_store) == _finish(on_disk) == 0
        assert _store_tables(s3_server, url, TWO_STAGE) == tables_and_feeds(local, TWO_STAGE)
    assert _verdict_on_store(store, bucket, f"{prefix}/q/report.json") == "pass"


def test_a_group_aggregate_over_a_changelog_on_the_store_equals_a_local_run(s3_server, bucket, prefix, store, tmp_path):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 10),
            change("+I", 2, 2, 5),
            change("-U", 1, 1, 10),
            change("+U", 1, 2, 7),
            change("-D", 2, 2, 5),
        ],
    )
    sql, sink = "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", {"primary_key": ["pId"]}
    store.put_file(bucket, f"{prefix}/sources/orders/001.json", tmp_path / "orders" / "001.json")
    store_spec = orders_spec(tmp_path / "a", sql, sink=sink, source={"path": f"s3a://{bucket}/{prefix}/sources/orders"})
    disk_spec = orders_spec(tmp_path / "b", sql, sink=sink, source={"path": str(tmp_path / "orders")})
    settings, url, local = _settings(tmp_path), f"s3a://{bucket}/{prefix}", tmp_path / "local"
    env = s3_server.environment()
    on_store = _lockstep("run", store_spec, url, settings, env)
    on_disk = _lockstep("run", disk_spec, local, settings, env)
    assert _finish(on_store) == _finish(on_disk) == 0
    assert _store_tables(s3_server, url, ("q/stream",)) == tables_and_feeds(local, ("q/stream",))
    assert (
        _verdict_on_store(store, bucket, f"{prefix}/q/report.json")
        == json.loads((local / "q" / "report.json").read_text())["verdict"]
    )


def test_kill_9_mid_stream_then_a_rerun_leaves_what_a_clean_run_leaves(s3_server, bucket, prefix, clean, tmp_path):
    spec, reference = clean
    settings, url = _settings(tmp_path, lease_seconds=2), f"s3a://{bucket}/{prefix}"
    env = s3_server.environment()
    killed = _lockstep("stream", spec, url, settings, env)
    work = tmp_path / "work" / bucket / prefix
    while committed_batches(work) < 3:
        assert killed.poll() is None, killed.communicate()[1]
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    # The micro-batches finished before the kill are committed (one record after each), whole.
    assert _micro_batches_committed(s3_server, bucket, f"{prefix}/q") >= 2
    time.sleep(2.5)  # the killed writer's lease lapses by itself
    assert _finish(_lockstep("stream", spec, url, settings, env)) == 0
    assert _store_tables(s3_server, url, TWO_STAGE) == tables_and_feeds(reference, TWO_STAGE)


def test_the_store_gone_mid_run_is_one_line_and_the_rerun_finishes_as_a_clean_run(clean, tmp_path):
    spec, reference = clean
    with LocalS3Server(tmp_path / "server") as server:
        server.create_bucket("runs")
        settings, url = _settings(tmp_path, lease_seconds=2), "s3a://runs/q"
        cut = _lockstep("stream", spec, url, settings, server.environment())
        while committed_batches(tmp_path / "work") < 2:
            assert cut.poll() is None, cut.communicate()[1]
            time.sleep(0.05)
        server.kill()
        _, err = cut.communicate(timeout=600)
        assert cut.returncode == 2
        assert len(err.strip().splitlines()) == 1 and f"cannot reach the object store at {server.endpoint}" in err
        server.start()  # the same objects, new ports
        _micro_batches_committed(server, "runs", "q/q")  # what is committed is whole
        time.sleep(2.5)
        assert _finish(_lockstep("stream", spec, url, settings, server.environment())) == 0
        assert _store_tables(server, url, TWO_STAGE) == tables_and_feeds(reference, TWO_STAGE)


def _micro_batches_committed(server: LocalS3Server, bucket: str, run: str) -> int:
    """How many micro-batches the newest commit record holds, over the stages' checkpoints,
    after checking that every record names only objects the store has."""
    with store_client(server) as store:
        present = {item.key for item in store.list(bucket, f"{run}/")}
        newest: dict = {}
        for record in sorted(k for k in present if k.startswith(f"{run}/_commits/")):
            data = store.get(bucket, record)
            assert data is not None, record
            newest = json.loads(data)["files"]
            missing = [rel for rel, entry in newest.items() if f"{run}/{entry[2]}" not in present]
            assert not missing, f"{record} names objects the store does not have: {missing[:3]}"
    return sum(1 for rel in newest if "/checkpoint/commits/" in rel and rel.rsplit("/", 1)[1].isdigit())


def _listed(server: LocalS3Server, bucket: str, prefix: str) -> list:
    with store_client(server) as store:
        return store.list(bucket, prefix)


def test_wrong_credentials_stop_the_step_before_spark_starts(s3_server, bucket, prefix, tmp_path):
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 10)])
    env = {**s3_server.environment(), "AWS_SECRET_ACCESS_KEY": "wrong"}
    process = _lockstep("run", spec, f"s3a://{bucket}/{prefix}", _settings(tmp_path), env)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert err.strip().count("\n") == 0 and "refused the credentials of access key 'lockstep-local'" in err
    assert not list((tmp_path / "work").glob("**/*.spark.log"))  # no JVM was started


def test_a_second_writer_from_another_process_is_refused(s3_server, bucket, prefix, store, tmp_path):
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 10)])
    holder = Lease(store, StoreUrl(bucket, f"{prefix}/q"), seconds=60)
    holder.acquire()
    try:
        process = _lockstep("stream", spec, f"s3a://{bucket}/{prefix}", _settings(tmp_path), s3_server.environment())
        _, err = process.communicate(timeout=120)
    finally:
        holder.release()
    assert process.returncode == 2
    assert f"the run folder is in use by pid {os.getpid()}" in err


def test_a_crash_after_the_first_commit_record_then_one_after_a_sink_commit_on_a_new_host(
    s3_server, bucket, prefix, store, clean, tmp_path
):
    """The first crash leaves a commit (the first micro-batch's) whose Delta log entries are not
    published yet: the record is the commit, and the next step that opens the run folder, here on
    a host that never saw it, publishes them from the record's blobs. That step crashes right after
    a later micro-batch's sink commit, before its record: the store keeps the micro-batches before.
    A third run finishes as a clean run."""
    spec, reference = clean
    settings, url = _settings(tmp_path, lease_seconds=2), f"s3a://{bucket}/{prefix}"
    env = s3_server.environment()
    sink_log = f"{prefix}/q/stages/stage1_dedup/stream/_delta_log/00000000000000000000.json"
    after_record = _lockstep("stream", spec, url, settings, {**env, "LOCKSTEP_FAULT_AFTER_STORE_RECORD": "1"})
    assert after_record.wait(600) == 71
    assert len(_listed(s3_server, bucket, f"{prefix}/q/_commits/")) == 1
    assert store.get(bucket, sink_log) is None  # not published
    shutil.rmtree(tmp_path / "work")
    time.sleep(2.5)  # the crashed writer's lease lapses
    after_sink = _lockstep("stream", spec, url, settings, {**env, "LOCKSTEP_FAULT_AFTER_SINK_COMMIT": "3"})
    assert after_sink.wait(600) == 70
    assert store.get(bucket, sink_log) is not None  # published by the restore
    assert 1 <= _micro_batches_committed(s3_server, bucket, f"{prefix}/q") <= 3
    time.sleep(2.5)
    assert _finish(_lockstep("stream", spec, url, settings, env)) == 0
    assert _store_tables(s3_server, url, TWO_STAGE) == tables_and_feeds(reference, TWO_STAGE)


def test_a_kill_during_the_batch_step_then_a_rerun_gives_the_clean_verdict(
    s3_server, bucket, prefix, store, clean, tmp_path
):
    spec, reference = clean
    settings, url = _settings(tmp_path, lease_seconds=2), f"s3a://{bucket}/{prefix}"
    env = s3_server.environment()
    assert _finish(_lockstep("stream", spec, url, settings, env)) == 0
    committed = _listed(s3_server, bucket, f"{prefix}/q/_commits/")
    batch = _lockstep("batch", spec, url, settings, env)
    while not list((tmp_path / "work").glob("**/logs/q.spark.log")):  # the step holds the lease and its JVM is up
        assert batch.poll() is None, batch.communicate()[1]
        time.sleep(0.05)
    batch.send_signal(signal.SIGKILL)
    batch.wait()
    assert _listed(s3_server, bucket, f"{prefix}/q/_commits/") == committed  # nothing of the batch step
    assert store.get(bucket, f"{prefix}/q/batch/_delta_log/00000000000000000000.json") is None
    time.sleep(2.5)
    assert _finish(_lockstep("run", spec, url, settings, env)) == 0
    assert _store_tables(s3_server, url, ("q/stream",)) == tables_and_feeds(reference, ("q/stream",))
    options = store_options(s3_server.environment())
    batch_on_store = DeltaTable(f"s3://{bucket}/{prefix}/q/batch", storage_options=options).to_pyarrow_table()
    batch_clean = DeltaTable(str(reference / "q" / "batch")).to_pyarrow_table()
    assert Counter(map(str, batch_on_store.to_pylist())) == Counter(map(str, batch_clean.to_pylist()))
    assert _verdict_on_store(store, bucket, f"{prefix}/q/report.json") == "pass"


def test_a_delta_source_read_on_the_store_gives_what_the_same_table_on_disk_gives(
    s3_server, bucket, prefix, store, tmp_path
):
    options = store_options(s3_server.environment())
    on_store, on_disk = f"s3://{bucket}/{prefix}/orders", str(tmp_path / "orders")
    write_orders_table(on_store, options)
    write_orders_table(on_disk)
    sql = "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId"
    store_spec = orders_spec(
        tmp_path / "a", sql, source={"path": on_store.replace("s3://", "s3a://"), "format": "delta"}
    )
    disk_spec = orders_spec(tmp_path / "b", sql, source={"path": on_disk, "format": "delta"})
    settings, url, local = _settings(tmp_path), f"s3a://{bucket}/{prefix}/runs", tmp_path / "local"
    env = s3_server.environment()
    first, second = _lockstep("run", store_spec, url, settings, env), _lockstep("run", disk_spec, local, settings, env)
    assert _finish(first) == _finish(second) == 0
    assert _store_tables(s3_server, url, ("q/stream",)) == tables_and_feeds(local, ("q/stream",))
    assert _verdict_on_store(store, bucket, f"{prefix}/runs/q/report.json") == "pass"
    assert not (tmp_path / "work" / "sources").exists()  # read where it is (S3A, delta-rs), not copied
