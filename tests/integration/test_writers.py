"""The two sink writers (delta-rs from the driver, delta-spark from the executors) give the same
tables, version for version of the change feed; each continues a table the other wrote; and the
delta-spark writer is exactly once across a crash, as the delta-rs writer is. (The demo's
windows and dedup are compared writer against writer, version for version, by the cluster test.)"""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from jobs.pipeline import Pipeline
from jobs.runtime.delta import read_change_feed
from jobs.runtime.layout import RunLayout
from jobs.stream.handler import FAULT_AFTER_COMMIT
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import table_rows
from tests.integration.test_cli import lockstep

WRITERS = ("delta-rs", "delta-spark")
EVENTS = [
    change("+I", 1, 1, 5),
    change("+I", 2, 1, 3),
    change("+I", 3, 2, 8),
    change("-U", 1, 1, 5),
    change("+U", 1, 2, 1),
    change("-D", 2, 1, 3),
    change("+I", 4, 1, 9),
    change("-U", 3, 2, 8),
    change("+U", 3, 2, 2),
    change("+I", 5, 3, 7),
    change("-D", 5, 3, 7),
    change("+I", 6, 1, 4),
]
# One of each shape the stream writes differently: an aggregate with a multiset (MIN), a global
# aggregate, a projection by key, a multiset (retract) table, a two-stage plan.
QUERIES = {
    "aggregate": "SELECT pId, SUM(income) AS total, MIN(income) AS lo, COUNT(*) AS n FROM orders GROUP BY pId",
    "global": "SELECT COUNT(*) AS n, SUM(income) AS total FROM orders",
    "projection": "SELECT order_id, pId, income * 2 AS doubled FROM orders WHERE income > 3",
    "multiset": "SELECT pId, income FROM orders",
    "two_stages": "SELECT order_id, COUNT(*) AS products, SUM(income) AS income FROM (SELECT order_id, pId, "
    "income, ROW_NUMBER() OVER (PARTITION BY pId ORDER BY income DESC) AS rn FROM orders) d "
    "WHERE rn = 1 GROUP BY order_id",
}


def feed_by_version(path) -> Counter:
    """The change feed as (version, change type, row) with the commit times left out."""
    steps = Counter()
    for row in read_change_feed(path).to_pylist():
        version, kind = row.pop("_commit_version"), row.pop("_change_type")
        del row["_commit_timestamp"]
        steps[(version, kind, tuple(sorted(row.items())))] += 1
    return steps


def tables_of(layout: RunLayout, pipeline: Pipeline) -> list:
    """The sink and every intermediate stage table."""
    return [layout.stream, *[layout.for_stage(s.name).stream for s in pipeline.plan.intermediate_stages]]


def run_with_each_writer(spec, out) -> dict[str, Pipeline]:
    pipelines = {}
    for writer in WRITERS:
        pipeline = Pipeline.open(spec, runs_dir=out / writer, writer=writer)
        assert pipeline.run().verdict == "pass", writer
        pipelines[writer] = pipeline
    return pipelines


def assert_same_tables(pipelines: dict[str, Pipeline]) -> None:
    rs, spark_written = pipelines["delta-rs"], pipelines["delta-spark"]
    for a, b in zip(tables_of(rs.layout, rs), tables_of(spark_written.layout, spark_written)):
        assert table_rows(a) == table_rows(b)
        assert feed_by_version(a) == feed_by_version(b)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(QUERIES))
def test_both_writers_write_the_same_table_version_for_version(spark, tmp_path, shape):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, QUERIES[shape], rows_per_batch=4)
    assert_same_tables(run_with_each_writer(spec, tmp_path / "runs"))


@pytest.mark.slow
@pytest.mark.parametrize("first, then", [("delta-rs", "delta-spark"), ("delta-spark", "delta-rs")])
def test_each_writer_continues_a_table_the_other_started(spark, tmp_path, first, then):
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:6])
    spec = orders_spec(tmp_path, QUERIES["two_stages"], rows_per_batch=4)
    Pipeline.open(spec, runs_dir=tmp_path / "mixed", writer=first).stream()
    write_changelog(tmp_path / "orders", "002.json", EVENTS[6:])
    mixed = Pipeline.open(spec, runs_dir=tmp_path / "mixed", writer=then)
    assert mixed.run().verdict == "pass"

    shutil.rmtree(tmp_path / "orders")
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:6])
    clean = Pipeline.open(spec, runs_dir=tmp_path / "clean", writer=first)
    clean.stream()
    write_changelog(tmp_path / "orders", "002.json", EVENTS[6:])
    clean.stream()
    for a, b in zip(tables_of(mixed.layout, mixed), tables_of(clean.layout, clean)):
        assert table_rows(a) == table_rows(b) and feed_by_version(a) == feed_by_version(b)


@pytest.mark.slow
def test_the_delta_spark_writer_skips_a_micro_batch_replayed_after_a_crash(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, QUERIES["aggregate"], rows_per_batch=4)  # batches 0-2: 2 is the last
    clean = Pipeline.open(spec, runs_dir=tmp_path / "clean", writer="delta-spark")
    clean.stream()

    crashed = lockstep(
        "stream",
        spec,
        "--out",
        tmp_path / "crashed",
        "--quiet",
        "--writer",
        "delta-spark",
        cwd=tmp_path,
        env={FAULT_AFTER_COMMIT: "2"},
    )
    assert crashed.returncode == 70, crashed.stderr
    restarted = Pipeline.open(spec, runs_dir=tmp_path / "crashed", writer="delta-spark")
    assert not (restarted.layout.checkpoint / "commits" / "2").exists()  # Spark never recorded batch 2
    restarted.stream()

    assert table_rows(restarted.layout.stream) == table_rows(clean.layout.stream)
    assert feed_by_version(restarted.layout.stream) == feed_by_version(clean.layout.stream)
    replays = [line for line in restarted.layout.batches_log.read_text().splitlines() if '"batch": 2,' in line]
    assert len(replays) == 1 and '"replayed": true' in replays[0]
