"""The same jobs on a real Spark standalone cluster: a master and two workers on this machine,
each its own JVM, with sources, sinks and run folders on the S3 server (SeaweedFS), as a cluster
without a shared disk keeps them. One `lockstep demo` on the cluster runs four queries on the
spark engine (the default on a cluster master: keyed and aggregation state on the executors,
MERGEs and change feeds written by executors, a stage reading another stage's feed), and
deduplication then a group aggregate once more on the local engine with the delta-spark writer.
Each gives the verdict and the tables of a local `lockstep demo` on local disk beside it (local
engine, delta-rs), the change feed version for version where the writers differ. A Delta source on
the store is read in place by the executors.

Slow (the cluster and two `lockstep demo` processes, several minutes), and run by CI. Every query
costs 40 s or more on the cluster on two cores, so the sample holds what a cluster changes; the
group aggregate runs as the two-stage plan's second stage rather than as a query of its own.
tests/cluster/test_kills.py kills a worker and the driver in the middle of its runs."""

from __future__ import annotations

import json
import shutil
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from jobs.store.paths import StorePath
from tests.conftest import ROOT, orders_spec
from tests.integration.conftest import table_rows
from tests.integration.test_cli import lockstep
from tests.integration.test_writers import feed_by_version
from tests.support.delta_orders import store_options, write_orders_table
from tests.support.standalone_cluster import StandaloneCluster
from tests.support.store_client import store_access, store_client

# Two to five micro-batches each (the demo's own sizes make up to eight): on two cores every
# micro-batch on the cluster costs seconds, and the writer tests cover the small sizes.
ROWS_PER_BATCH = 3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2) as running:
        yield running


def query_folder(folder, names: list[str]):
    # Without the dimension tables (these queries look nothing up), neither demo serves them, so
    # the two can run at once (the service has a fixed port).
    shutil.copytree(
        ROOT / "conf" / "queries" / "data", folder / "data", ignore=shutil.ignore_patterns("generated", "dimensions")
    )
    for name in names:
        spec = yaml.safe_load((ROOT / "conf" / "queries" / f"{name}.yaml").read_text())
        spec["stream"]["rows_per_batch"] = ROWS_PER_BATCH
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def applications(cluster: StandaloneCluster) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ui_port}/json/", timeout=5) as page:
        state = json.load(page)
    return state.get("activeapps", []) + state.get("completedapps", [])


def demos_side_by_side(cluster: StandaloneCluster, local_queries, cluster_queries, tmp_path, store) -> None:
    """`lockstep demo` over `local_queries` locally (into tmp_path/local) and over `cluster_queries`
    on the cluster, with its sources and run folders on the store (`store`: the server, the
    runs URL); both must finish with every query passing. Side by side: the cluster run's
    executors sit idle most of its time (the driver is the rest), room the local run can use."""
    server, runs = store
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"store:\n  work_dir: {tmp_path / 'work'}\n")
    with ThreadPoolExecutor(2) as both:
        local = both.submit(
            lockstep, "demo", "--queries", local_queries, "--out", tmp_path / "local", "--quiet", cwd=tmp_path
        )
        on_cluster = both.submit(
            lockstep,
            "demo",
            "--queries",
            cluster_queries,
            "--out",
            runs,
            "--settings",
            settings,
            "--quiet",
            "--master",
            cluster.url,
            cwd=tmp_path,
            env=server.environment(),
            timeout=1200,
        )
        local, on_cluster = local.result(), on_cluster.result()
    assert local.returncode == 0, local.stdout + local.stderr
    assert on_cluster.returncode == 0, on_cluster.stdout + on_cluster.stderr


def verdicts(tmp_path, on_store: StorePath, local_name: str, cluster_name: str) -> list[str]:
    """A query's verdict in the local run and in the cluster run (its report on the store)."""
    local = json.loads((tmp_path / "local" / local_name / "report.json").read_text())
    return [local["verdict"], json.loads((on_store / cluster_name / "report.json").read_text())["verdict"]]


# On the cluster, the spark engine (a cluster master's default) runs MIN / MAX / COUNT DISTINCT
# per group, a join behind the upsert materializer, deduplication then an aggregate (two stages,
# the second reading the first's feed) and windows with final results. The same two stages also
# run on the local engine with the delta-spark writer, named apart in the same `lockstep demo`.
ON_SPARK_ENGINE = ["customer_stats", "seed_003_join", "seed_000_dedup", "seed_004_windows"]
ON_LOCAL_ENGINE = "seed_000_dedup_local_engine"


def cluster_queries(folder):
    """The spark engine's queries, and seed_000_dedup again under ON_LOCAL_ENGINE's name with the
    local engine and the delta-spark writer (the spec's choice wins over the master's default)."""
    query_folder(folder, ON_SPARK_ENGINE)
    spec = yaml.safe_load((folder / "seed_000_dedup.yaml").read_text())
    spec["name"] = ON_LOCAL_ENGINE
    spec["stream"]["engine"] = "local"
    spec.setdefault("sink", {})["writer"] = "delta-spark"
    (folder / f"{ON_LOCAL_ENGINE}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def test_both_engines_on_a_standalone_cluster_with_everything_on_the_store_match_local_disk(
    cluster, s3_server, shared_bucket, tmp_path
):
    """The cluster run reads its sources from the bucket and keeps its run folders under an s3a://
    --out: the executors read the staged segments and write the checkpoints and the Delta tables
    at the run folders' keys (S3A); lockstep's own files are committed from the driver's working
    copy. Verdicts and tables equal a local `lockstep demo` on local disk."""
    assert cluster.alive_workers() == 2
    runs = f"s3a://{shared_bucket}/cluster/runs"
    queries = cluster_queries(tmp_path / "queries")
    on_the_store(queries, s3_server, shared_bucket, "cluster/queries")
    local_queries = query_folder(tmp_path / "local_queries", ON_SPARK_ENGINE)
    demos_side_by_side(cluster, local_queries, queries, tmp_path, (s3_server, runs))
    assert [app["name"] for app in applications(cluster)] == ["lockstep"]  # it ran there, not locally
    on_store = StorePath.of(runs, store_access(s3_server))
    for name in ON_SPARK_ENGINE:
        assert verdicts(tmp_path, on_store, name, name) == ["pass", "pass"], name
        assert engine(tmp_path / "work", shared_bucket, name) == "spark"
        assert table_rows(on_store / name / "stream") == table_rows(tmp_path / "local" / name / "stream"), name
    # The local engine and delta-spark on the cluster: the same verdict, tables and change feed,
    # version for version, as the local run's delta-rs.
    on_local, reference = on_store / ON_LOCAL_ENGINE, tmp_path / "local" / "seed_000_dedup"
    assert verdicts(tmp_path, on_store, "seed_000_dedup", ON_LOCAL_ENGINE) == ["pass", "pass"]
    assert engine(tmp_path / "work", shared_bucket, ON_LOCAL_ENGINE) == "local"
    for table in ("stream", "batch", "stages/stage1_dedup/stream"):
        assert table_rows(on_local / table) == table_rows(reference / table), table
    assert feed_by_version(on_local / "stream") == feed_by_version(reference / "stream")


def engine(work, bucket: str, name: str) -> str:
    """The engine a query's run folder records, in the cluster run's working copy."""
    return (work / bucket / "cluster" / "runs" / name / "_state" / "engine").read_text().strip()


def on_the_store(folder, server, bucket: str, prefix: str) -> None:
    """The query folder's specs reading their sources from the store: the data folder is put
    under s3a://bucket/prefix/ and the specs name their sources there."""
    with store_client(server) as store:
        for path in sorted((folder / "data").rglob("*")):
            if path.is_file():
                store.put_file(bucket, f"{prefix}/{path.relative_to(folder).as_posix()}", path)
    for spec_path in folder.glob("*.yaml"):
        spec = yaml.safe_load(spec_path.read_text())
        for source in spec["sources"].values():
            source["path"] = f"s3a://{bucket}/{prefix}/{source['path']}"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))


def test_a_delta_source_and_the_run_folder_on_the_store_under_the_cluster(cluster, s3_server, shared_bucket, tmp_path):
    """The cluster's executors read the table's versions through S3A, and the run folder is on
    the store too. The same spec over the same table on local disk, in local mode, gives the same
    sink and verdict."""
    env = s3_server.environment()
    on_store, on_disk = f"s3://{shared_bucket}/cluster-delta-source/orders", str(tmp_path / "orders")
    write_orders_table(on_store, store_options(env))
    write_orders_table(on_disk)
    sql, sink = "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", {"primary_key": ["pId"]}
    store_url = on_store.replace("s3://", "s3a://")
    runs = f"s3a://{shared_bucket}/cluster-delta-source/runs"
    store_spec = orders_spec(tmp_path / "a", sql, sink=sink, source={"path": store_url, "format": "delta"})
    disk_spec = orders_spec(tmp_path / "b", sql, sink=sink, source={"path": on_disk, "format": "delta"})
    with ThreadPoolExecutor(2) as both:
        on_cluster = both.submit(
            lockstep,
            "run",
            store_spec,
            "--out",
            runs,
            "--master",
            cluster.url,
            "--quiet",
            cwd=tmp_path,
            env=env,
            timeout=900,
        )
        local = both.submit(lockstep, "run", disk_spec, "--out", tmp_path / "local", "--quiet", cwd=tmp_path)
        on_cluster, local = on_cluster.result(), local.result()
    assert on_cluster.returncode == 0, on_cluster.stderr
    assert local.returncode == 0, local.stderr
    on_store = StorePath.of(runs, store_access(s3_server))
    assert verdicts(tmp_path, on_store, "q", "q") == ["pass", "pass"]
    assert table_rows(on_store / "q" / "stream") == table_rows(tmp_path / "local" / "q" / "stream")
