"""A source of format delta: an existing Delta table's change data feed is the changelog, its
versions the stream's offsets; the batch step reads the table by time travel."""

from __future__ import annotations

import json
from datetime import UTC, timedelta

import pytest
from delta.tables import DeltaTable as SparkDeltaTable

from jobs.pipeline import Pipeline
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import table_rows
from tests.integration.test_cli import lockstep

SCHEMA = "order_id BIGINT, pId BIGINT, income BIGINT"
TOTALS = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"


def orders_table(spark, path, rows, *, feed: bool = True, deletion_vectors: bool = False):
    """Version 0 of a Delta table of orders, written by Spark."""
    (
        spark.createDataFrame(rows, SCHEMA)
        .write.format("delta")
        .option("delta.enableChangeDataFeed", str(feed).lower())
        .option("delta.enableDeletionVectors", str(deletion_vectors).lower())
        .save(str(path))
    )
    return SparkDeltaTable.forPath(spark, str(path))


def delta_spec(folder, sql=TOTALS, **source):
    return orders_spec(folder, sql, source={"path": "table", "format": "delta", **source})


def totals_of(rows) -> list[dict]:
    totals = {}
    for _order_id, pid, income in rows:
        total, n = totals.get(pid, (0, 0))
        totals[pid] = (total + income, n + 1)
    return [{"pId": p, "total": t, "n": n} for p, (t, n) in sorted(totals.items())]


@pytest.mark.slow
def test_a_delta_tables_versions_are_a_changelog_and_a_rerun_reads_only_new_versions(spark, tmp_path):
    table = orders_table(spark, tmp_path / "table", [(1, 1, 5), (2, 1, 3), (3, 2, 8)])
    table.update("order_id = 1", {"income": "7", "pId": "2"})  # v1: update_preimage / postimage
    table.delete("order_id = 2")  # v2
    spark.createDataFrame([(4, 3, 9)], SCHEMA).write.format("delta").mode("append").save(str(tmp_path / "table"))
    pipeline = Pipeline.open(delta_spec(tmp_path), runs_dir=tmp_path / "runs")

    assert pipeline.run().verdict == "pass"
    assert table_rows(pipeline.layout.stream) == totals_of([(1, 2, 7), (3, 2, 8), (4, 3, 9)])
    manifest = json.loads((pipeline.layout.staged("orders") / "manifest.json").read_text())
    assert [f["version"] for f in manifest["files"]] == [0, 1, 2, 3]

    table.update("order_id = 3", {"income": "1"})  # v4
    report = pipeline.run()
    assert report.verdict == "pass"
    assert table_rows(pipeline.layout.stream) == totals_of([(1, 2, 7), (3, 2, 1), (4, 3, 9)])
    manifest = json.loads((pipeline.layout.staged("orders") / "manifest.json").read_text())
    assert [f["version"] for f in manifest["files"]] == [0, 1, 2, 3, 4]
    assert manifest["rows"] == 3 + 2 + 1 + 1 + 2  # v0 as inserts, then each version's feed


@pytest.mark.slow
def test_a_starting_version_or_time_begins_with_that_snapshot_as_inserts(spark, tmp_path):
    table = orders_table(spark, tmp_path / "table", [(1, 1, 5), (2, 1, 3)])
    table.update("order_id = 2", {"income": "4"})  # v1
    table.delete("order_id = 1")  # v2
    spark.createDataFrame([(3, 2, 6)], SCHEMA).write.format("delta").mode("append").save(str(tmp_path / "table"))
    expected = totals_of([(2, 1, 4), (3, 2, 6)])
    by_version = Pipeline.open(delta_spec(tmp_path, starting_version=2), runs_dir=tmp_path / "v")
    assert by_version.run().verdict == "pass"
    assert table_rows(by_version.layout.stream) == expected
    staged = json.loads((by_version.layout.staged("orders") / "manifest.json").read_text())
    assert [(f["version"], f["rows"]) for f in staged["files"]] == [(2, 1), (3, 1)]

    commit_of_v1 = table.history().where("version = 1").first()["timestamp"]
    at = (commit_of_v1 + timedelta(milliseconds=1)).replace(tzinfo=UTC).isoformat()
    by_time = Pipeline.open(delta_spec(tmp_path, starting_timestamp=at), runs_dir=tmp_path / "t")
    assert by_time.run().verdict == "pass"
    staged = json.loads((by_time.layout.staged("orders") / "manifest.json").read_text())
    assert [f["version"] for f in staged["files"]][0] in (1, 2)  # v1, unless v2 landed in the same ms
    assert table_rows(by_time.layout.stream) == expected


def test_a_table_with_deletion_vectors_is_read_through_the_connector(spark, tmp_path):
    table = orders_table(spark, tmp_path / "table", [(1, 1, 5), (2, 1, 3), (3, 2, 8)], deletion_vectors=True)
    table.delete("order_id = 3")
    pipeline = Pipeline.open(delta_spec(tmp_path), runs_dir=tmp_path / "runs")
    assert pipeline.run().verdict == "pass"
    assert table_rows(pipeline.layout.stream) == totals_of([(1, 1, 5), (2, 1, 3)])


def test_one_query_reads_another_querys_sink(spark, tmp_path):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [change("+I", 1, 1, 5), change("+I", 2, 2, 3), change("-U", 1, 1, 5), change("+U", 1, 1, 6)],
    )
    first = Pipeline.open(
        orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", name="totals"),
        runs_dir=tmp_path / "runs",
    )
    assert first.run().verdict == "pass"
    spec = orders_spec(
        tmp_path,
        "SELECT total > 4 AS big, COUNT(*) AS products FROM totals GROUP BY total > 4",
        name="sizes",
        source={
            "path": "runs/totals/stream",
            "format": "delta",
            "schema": "pId BIGINT, total BIGINT",
            "primary_key": ["pId"],
        },
    )
    spec.write_text(spec.read_text().replace("orders:", "totals:"))
    second = Pipeline.open(spec, runs_dir=tmp_path / "runs")
    assert second.run().verdict == "pass"
    assert table_rows(second.layout.stream) == [{"big": False, "products": 1}, {"big": True, "products": 1}]


@pytest.mark.parametrize(
    "setup, message",
    [
        ("no_feed", "the Delta table's change data feed is off"),
        ("not_delta", "not a Delta table"),
        ("missing_column", "the schema names income, which the Delta table does not have"),
    ],
)
def test_a_delta_source_that_cannot_be_read_is_one_line_and_exit_2(spark, tmp_path, setup, message):
    if setup == "no_feed":
        orders_table(spark, tmp_path / "table", [(1, 1, 5)], feed=False)
    elif setup == "missing_column":
        (
            spark.createDataFrame([(1, 1)], "order_id BIGINT, pId BIGINT")
            .write.format("delta")
            .option("delta.enableChangeDataFeed", "true")
            .save(str(tmp_path / "table"))
        )
    else:
        (tmp_path / "table").mkdir()
    result = lockstep("run", delta_spec(tmp_path), "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(tmp_path / "table") in lines[0]
    assert not (tmp_path / "runs" / "q" / "stream").exists()
