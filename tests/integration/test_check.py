"""The Great Expectations check: it passes on agreeing results and each suite fails, with the
rows to show for it, when the results or the change feed are wrong."""

import json
import random
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from expectations.check import run_check
from expectations.report.model import SCHEMA_VERSION
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import ROOT
from tests.integration.conftest import run_both


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory):
    """The income_per_product demo, streamed and batched once for the module."""
    folder = tmp_path_factory.mktemp("demo")
    shutil.copytree(ROOT / "conf" / "queries" / "data" / "orders", folder / "data" / "orders")
    spec = folder / "income_per_product.yaml"
    shutil.copy(ROOT / "conf" / "queries" / "income_per_product.yaml", spec)
    result = run_both(spec, folder / "runs")
    return plan_query(load_spec(spec)), result.layout


@pytest.fixture
def run(demo_run, tmp_path):
    """A private copy of the demo run, free to tamper with."""
    plan, layout = demo_run
    copy = type(layout)(tmp_path / layout.root.name)
    shutil.copytree(layout.root, copy.root)
    return plan, copy


def names_failed(report):
    return sorted(e["name"] for e in report["expectations"] if not e["success"])


def test_agreeing_results_pass_with_a_complete_report_and_data_docs(run):
    plan, layout = run
    report = run_check(plan, Settings(), layout).to_json()
    assert report["verdict"] == "pass" and report["schema_version"] == SCHEMA_VERSION
    assert (report["stream_rows"], report["batch_rows"]) == (3, 3)
    assert (report["missing_rows"], report["extra_rows"], report["mismatched_rows"]) == (0, 0, 0)
    assert report["changelog"] == {"+I": 4, "-U": 4, "+U": 4, "-D": 1}
    assert {e["suite"] for e in report["expectations"]} == {"unity", "batch_result", "retraction", "state"}
    assert (layout.root / report["data_docs"]).exists()
    assert json.loads(layout.report.read_text()) == json.loads(json.dumps(report, default=str))


def test_a_second_check_renders_its_own_data_docs_pages_and_keeps_the_first_checks(run):
    plan, layout = run
    site = layout.root / "gx" / "uncommitted" / "data_docs" / "local_site"
    run_check(plan, Settings(), layout)
    first = {page: page.stat().st_mtime_ns for page in (site / "validations").rglob("*.html")}
    run_check(plan, Settings(), layout)
    pages = sorted((site / "validations").rglob("*.html"))
    results = list((layout.root / "gx" / "uncommitted" / "validations").rglob("*.json"))
    assert len(first) == 4 and len(pages) == len(results) == 8  # four suites, checked twice
    assert {page: page.stat().st_mtime_ns for page in first} == first  # not rendered again
    index = (site / "index.html").read_text()
    assert all(str(page.relative_to(site)) in index for page in pages)
    assert sorted(p.stem for p in (site / "expectations").rglob("*.html")) == [
        "batch_result",
        "retraction",
        "state",
        "unity",
    ]


def test_a_row_the_batch_has_and_the_stream_lacks_fails_unity_with_a_sample(run):
    plan, layout = run
    batch = DeltaTable(str(layout.batch)).to_pyarrow_table()
    extra = pa.table({"pId": pa.array([9], pa.int64()), "total": pa.array([1], pa.int64())})
    write_deltalake(str(layout.batch), pa.concat_tables([batch, extra]), mode="overwrite")
    report = run_check(plan, Settings(), layout).to_json()
    assert report["verdict"] == "fail" and report["missing_rows"] == 1
    assert "expect_no_rows_missing_from_stream" in names_failed(report)
    assert report["samples"]["expect_no_rows_missing_from_stream"] == [{"pId": 9, "total": 1}]


def test_a_value_that_differs_is_a_mismatch_showing_both_sides(run):
    plan, layout = run
    batch = DeltaTable(str(layout.batch)).to_pyarrow_table().to_pylist()
    changed = [dict(r, total=r["total"] + 1) if r["pId"] == 2 else r for r in batch]
    write_deltalake(
        str(layout.batch),
        pa.Table.from_pylist(changed, schema=pa.schema([("pId", pa.int64()), ("total", pa.int64())])),
        mode="overwrite",
    )
    report = run_check(plan, Settings(), layout).to_json()
    assert names_failed(report) == ["expect_no_mismatched_values"]
    assert report["samples"]["expect_no_mismatched_values"] == [{"pId": 2, "total__stream": 13, "total__batch": 14}]


def test_a_second_live_row_for_a_key_in_the_sink_breaks_the_retraction_rules(run):
    plan, layout = run
    duplicate = pa.table({"pId": pa.array([1], pa.int64()), "total": pa.array([99], pa.int64())})
    write_deltalake(str(layout.stream), duplicate, mode="append")
    consistency = json.loads(layout.consistency.read_text())
    consistency["sink_version"] = DeltaTable(str(layout.stream)).version()
    layout.consistency.write_text(json.dumps(consistency))
    report = run_check(plan, Settings(), layout).to_json()
    failed = names_failed(report)
    assert "expect_no_insert_over_live_row" in failed
    assert "expect_sink_key_unique" in failed


@pytest.mark.parametrize("product", [4, 99], ids=["inserted-then-emptied", "never-seen"])
def test_a_group_whose_rows_were_all_retracted_must_not_be_in_the_sink(run, product):
    plan, layout = run
    ghost = pa.table({"pId": pa.array([product], pa.int64()), "total": pa.array([0], pa.int64())})
    write_deltalake(str(layout.stream), ghost, mode="append")
    consistency = json.loads(layout.consistency.read_text())
    consistency["sink_version"] = DeltaTable(str(layout.stream)).version()
    layout.consistency.write_text(json.dumps(consistency))
    report = run_check(plan, Settings(), layout).to_json()
    assert "expect_no_empty_group_in_sink" in names_failed(report)
    assert report["extra_rows"] == 1


def test_an_expectations_first_rows_and_their_count_come_from_one_spark_job(spark):
    from expectations.suites.unexpected_rows import first_rows_and_count
    from jobs.runtime.small_work import sized_for

    tracker = spark.sparkContext.statusTracker()
    frame = spark.range(0, 450, numPartitions=3).selectExpr("id", "id % 7 AS g")
    with sized_for(spark, rows=1, threshold=2):  # a check's settings for small work
        jobs_before = set(tracker.getJobIdsForGroup(None))
        rows, total = first_rows_and_count(frame.where("g = 3"), 20)
        jobs = set(tracker.getJobIdsForGroup(None)) - jobs_before
    assert total == sum(1 for i in range(450) if i % 7 == 3)
    assert len(rows) == 20 and all(set(r) == {"id", "g"} and r["g"] == 3 for r in rows)
    assert len(jobs) == 1
    assert first_rows_and_count(frame.where("g = 9"), 20) == ([], 0)


def test_the_replay_rule_lists_what_except_all_both_ways_lists(spark):
    """ExpectChangeFeedReplaysToTable counts both sides in one aggregation; on random rows with
    copies, NULLs and -0.0 it lists each side's rows as EXCEPT ALL both ways does."""
    from expectations.columns import Columns, Tolerance
    from expectations.sql import STREAM_VIEW
    from expectations.suites.retraction import ExpectChangeFeedReplaysToTable

    rng = random.Random(5)
    values = [None, 0.0, -0.0, 1.5, 2.0]

    def rows(n: int) -> list[tuple]:
        return [(rng.choice([1, 2, None]), rng.choice(values)) for _ in range(n)]

    kinds, nexts = ["insert", "update_postimage", "delete"], [None, "insert"]
    feed = [(k, x, rng.choice(kinds), rng.choice(nexts)) for k, x in rows(60)]
    spark.createDataFrame(feed, "k INT, x DOUBLE, _change_type STRING, __next_type STRING").createOrReplaceTempView(
        "fed"
    )
    spark.createDataFrame(rows(40), "k INT, x DOUBLE").createOrReplaceTempView(STREAM_VIEW)
    cols = Columns(("k",), ("x",), frozenset({"x"}), Tolerance(0.0, 0.0))
    listed = spark.sql(ExpectChangeFeedReplaysToTable.rows_query(cols).replace("{batch}", "fed")).collect()
    replayed = "SELECT k, x FROM fed WHERE __next_type IS NULL AND _change_type IN ('insert', 'update_postimage')"
    table = f"SELECT k, x FROM {STREAM_VIEW}"
    expected = spark.sql(
        f"SELECT 'only in the replayed change feed' AS side, * FROM ({replayed} EXCEPT ALL {table}) "
        f"UNION ALL SELECT 'only in the sink table' AS side, * FROM ({table} EXCEPT ALL {replayed})"
    ).collect()
    assert expected  # the random rows do differ, both ways
    assert {r.side for r in expected} == {"only in the replayed change feed", "only in the sink table"}
    assert sorted(map(tuple, listed), key=repr) == sorted(map(tuple, expected), key=repr)


@pytest.mark.parametrize("key", [("k", "f"), ()], ids=["keyed", "keyless"])
def test_the_feed_ordered_in_arrow_is_the_feed_sparks_window_orders(spark, key):
    """order_feed (the delta-rs writer's feed, ordered in the driver) gives each change the
    previous and next change of its key that ordered_feed's window gives, on random feeds whose
    keys have NULLs, NaN and both zeros; each change is unique in its key's (commit, rank) order,
    where Spark's own order is defined."""
    import math

    from expectations.columns import Columns, Tolerance
    from expectations.feed_order import order_feed
    from expectations.suites.retraction import ordered_feed
    from jobs.runtime.arrow_frames import frame_of

    rng = random.Random(11)
    kinds = ["insert", "update_preimage", "update_postimage", "delete"]
    seen, changes = set(), []
    for _ in range(400):
        k, f = rng.choice([1, 2, None]), rng.choice([0.0, -0.0, math.nan, 2.5, None])
        kind, version = rng.choice(kinds), rng.randrange(6 if key else 300)
        grouped_as = None if f is None else "nan" if math.isnan(f) else f + 0.0  # -0.0 + 0.0 is 0.0
        place = (k, grouped_as, version, kind in ("update_preimage", "delete"))[0 if key else 2 :]
        if place not in seen:
            seen.add(place)
            changes.append((k, f, rng.choice([1, 2, None]), kind, version))
    feed = pa.table(
        list(zip(*changes)),
        schema=pa.schema(
            [
                ("k", pa.int32()),
                ("f", pa.float64()),
                ("x", pa.int64()),
                ("_change_type", pa.string()),
                ("_commit_version", pa.int64()),
            ]
        ),
    )
    cols = Columns(key, tuple(c for c in ("k", "f", "x") if c not in key), frozenset({"f"}), Tolerance(0.0, 0.0))
    frame_of(spark, feed).createOrReplaceTempView("unordered_feed")
    columns = "k, f, x, _change_type, _commit_version, __prev_type, __prev_version, __next_type, __prev_image"
    by_window = spark.sql(f"SELECT {columns} FROM ({ordered_feed(cols, 'unordered_feed')})").collect()
    in_arrow = order_feed(feed, cols).select([c.strip() for c in columns.split(",")]).to_pylist()
    assert sum(r["__prev_type"] is not None for r in by_window) > 100  # keys with many changes
    assert sorted(repr(tuple(r.asDict(recursive=True).values())) for r in by_window) == sorted(
        repr(tuple(r.values())) for r in in_arrow
    )
    for rows in (0, 1):  # a sink that never changed, or once
        assert order_feed(feed.slice(0, rows), cols).column("__prev_type").to_pylist() == [None] * rows
