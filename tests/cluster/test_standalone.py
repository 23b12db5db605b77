"""The same jobs on a real Spark standalone cluster: a master and two workers on this machine,
each its own JVM, with `--writer delta-spark` (the MERGEs and change feeds on the executors).
A window query and a two-stage plan (deduplication, then a group aggregate) give the same
verdicts, the same sink and batch tables, and the same sink change feed version for version, as
local mode with the default writer (delta-rs).

Slow (the cluster and two `lockstep demo` processes, several minutes), and run by CI. Every query
costs 40 s or more on the cluster on two cores, so the sample holds what a cluster changes: keyed
state and aggregation state on executors across two workers, MERGEs and change feeds written by
executors (the windows' end-of-input close by a writer of its own), and a stage reading another
stage's feed. The group aggregate runs as the two-stage plan's second stage rather than as a
query of its own; a join writes through the same upsert path as the deduplication, and is left
to local mode.

The spark engine (docs/engines.md), which a cluster master chooses when nothing else does, runs a
MIN / MAX / COUNT DISTINCT aggregate, a join behind the upsert materializer, the two-stage plan and
the windows on the cluster, with the local engine's sinks and verdicts. tests/cluster/test_kills.py
kills a worker and the driver in the middle of its runs."""

from __future__ import annotations

import json
import shutil
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.conftest import table_rows
from tests.integration.test_cli import lockstep
from tests.integration.test_writers import feed_by_version
from tests.support.standalone_cluster import StandaloneCluster

# Event-time windows, and deduplication then a group aggregate (two stages).
QUERIES = ["seed_004_windows", "seed_000_dedup"]
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


@pytest.fixture
def queries(tmp_path):
    return query_folder(tmp_path / "queries", QUERIES)


def applications(cluster: StandaloneCluster) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ui_port}/json/", timeout=5) as page:
        state = json.load(page)
    return state.get("activeapps", []) + state.get("completedapps", [])


def demos_side_by_side(cluster: StandaloneCluster, queries, tmp_path, *cluster_options) -> None:
    """`lockstep demo` over the queries locally (into tmp_path/local) and on the cluster with
    `cluster_options` (into tmp_path/cluster); both must finish with every query passing. Side by
    side: the cluster run's executors sit idle most of its time (about 65 of 200 s busy, the
    driver is the rest), room the local run can use."""
    with ThreadPoolExecutor(2) as both:
        local = both.submit(
            lockstep, "demo", "--queries", queries, "--out", tmp_path / "local", "--quiet", cwd=tmp_path
        )
        on_cluster = both.submit(
            lockstep,
            "demo",
            "--queries",
            queries,
            "--out",
            tmp_path / "cluster",
            "--quiet",
            "--master",
            cluster.url,
            *cluster_options,
            cwd=tmp_path,
            timeout=1200,
        )
        local, on_cluster = local.result(), on_cluster.result()
    assert local.returncode == 0, local.stdout + local.stderr
    assert on_cluster.returncode == 0, on_cluster.stdout + on_cluster.stderr


def verdicts(tmp_path, name: str) -> list[str]:
    """The query's verdict in the local run and in the cluster run."""
    return [json.loads((tmp_path / run / name / "report.json").read_text())["verdict"] for run in ("local", "cluster")]


def test_queries_on_a_standalone_cluster_with_delta_spark_match_local_mode(cluster, queries, tmp_path):
    assert cluster.alive_workers() == 2
    demos_side_by_side(cluster, queries, tmp_path, "--engine", "local", "--writer", "delta-spark")
    assert [app["name"] for app in applications(cluster)] == ["lockstep"]  # it ran there, not locally
    for name in QUERIES:
        assert verdicts(tmp_path, name) == ["pass", "pass"], name
        assert table_rows(tmp_path / "cluster" / name / "stream") == table_rows(tmp_path / "local" / name / "stream")
        assert feed_by_version(tmp_path / "cluster" / name / "stream") == feed_by_version(
            tmp_path / "local" / name / "stream"
        ), name
        assert table_rows(tmp_path / "cluster" / name / "batch") == table_rows(tmp_path / "local" / name / "batch")


# The spark engine: MIN / MAX / COUNT DISTINCT per group, a join behind the upsert materializer,
# deduplication then an aggregate (two stages, the second reading the first's feed), and
# windows with final results.
ON_SPARK_ENGINE = ["customer_stats", "seed_003_join", "seed_000_dedup", "seed_004_windows"]


def test_the_spark_engine_on_a_standalone_cluster_matches_the_local_engine(cluster, tmp_path):
    # No --engine: a cluster master chooses the spark engine.
    demos_side_by_side(cluster, query_folder(tmp_path / "queries", ON_SPARK_ENGINE), tmp_path)
    for name in ON_SPARK_ENGINE:
        assert verdicts(tmp_path, name) == ["pass", "pass"], name
        assert (tmp_path / "cluster" / name / "_state" / "engine").read_text().strip() == "spark"
        assert table_rows(tmp_path / "cluster" / name / "stream") == table_rows(tmp_path / "local" / name / "stream")
