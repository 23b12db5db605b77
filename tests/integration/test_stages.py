"""Multi-stage plans: a crash in the middle of a chain changes nothing on restart, a second run
continues every stage where it stopped, and the check names the first stage that diverges."""

import shutil
from collections import Counter

from deltalake import DeltaTable

from expectations.check import run_check
from jobs.batch.job import run_batch
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.delta import read_change_feed
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.handler import FAULT_AFTER_COMMIT
from jobs.stream.job import run_stream
from tests.conftest import ROOT, change, orders_spec, write_changelog
from tests.integration.conftest import run_both, table_rows
from tests.integration.test_cli import lockstep

# Keep the order with the highest income per product, then count products per kept order id.
DEDUP_THEN_AGGREGATE = (
    "SELECT order_id, COUNT(*) AS products, SUM(income) AS income FROM "
    "(SELECT order_id, pId, income, ROW_NUMBER() OVER (PARTITION BY pId ORDER BY income DESC) AS rn "
    "FROM orders) d WHERE rn = 1 GROUP BY order_id"
)
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


def feed_content(path):
    return Counter(
        tuple(sorted((k, str(v)) for k, v in row.items() if k != "_commit_timestamp"))
        for row in read_change_feed(path).to_pylist()
    )


def test_a_crash_inside_the_first_stage_changes_nothing_on_restart(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, DEDUP_THEN_AGGREGATE, rows_per_batch=2)
    clean = run_both(spec, tmp_path / "clean")
    assert clean.stream == clean.batch

    crashed = lockstep(
        "stream", spec, "--out", tmp_path / "crashed", "--quiet", cwd=tmp_path, env={FAULT_AFTER_COMMIT: "2"}
    )
    assert crashed.returncode == 70, crashed.stderr
    layout = RunLayout.for_query(tmp_path / "crashed", "q")
    assert not layout.stream.exists() or DeltaTable(str(layout.stream)).version() == 0

    run_stream(plan_query(load_spec(spec)), Settings(), layout)
    stage = layout.stage_table("stage1_dedup")
    assert table_rows(stage) == table_rows(clean.layout.stage_table("stage1_dedup"))
    assert feed_content(stage) == feed_content(clean.layout.stage_table("stage1_dedup"))
    assert table_rows(layout.stream) == clean.stream
    assert feed_content(layout.stream) == feed_content(clean.layout.stream)


def test_a_second_run_continues_every_stage(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:6])
    spec = orders_spec(tmp_path, DEDUP_THEN_AGGREGATE, rows_per_batch=2)
    first = run_both(spec, tmp_path / "runs")
    assert first.stream == first.batch
    write_changelog(tmp_path / "orders", "002.json", EVENTS[6:])
    second = run_both(spec, tmp_path / "runs")
    assert second.stream == second.batch == run_both(spec, tmp_path / "fresh").stream
    assert second.stream != first.stream


def test_the_check_names_the_first_stage_that_diverges(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, DEDUP_THEN_AGGREGATE, rows_per_batch=4)
    plan = plan_query(load_spec(spec))
    outcome = run_both(spec, tmp_path / "runs")
    report = run_check(plan, Settings(), outcome.layout).to_json()
    assert report["verdict"] == "pass"
    assert [s["agrees"] for s in report["stages"]] == [True]
    assert report["first_diverging_stage"] is None

    # The stage table loses product 1's kept order, as a broken deduplication would: the
    # comparison of that stage with its batch equivalent finds it.
    DeltaTable(str(outcome.layout.stage_table("stage1_dedup"))).delete("pId = 1")
    run_batch(plan, Settings(), outcome.layout)
    report = run_check(plan, Settings(), outcome.layout).to_json()
    assert report["first_diverging_stage"] == "stage1_dedup"
    assert report["stages"][0]["missing_rows"] == 1


def test_a_stage_that_emits_nothing_is_an_empty_changelog_for_the_next(spark, tmp_path):
    # Order 5 comes and goes inside one micro-batch: the dedup stage's table gets no change, and
    # the aggregate stage must run on that empty feed (found by the join property test: an inner
    # join whose keys never match, under an aggregate).
    write_changelog(tmp_path / "orders", "001.json", EVENTS[9:11])
    spec = orders_spec(tmp_path, DEDUP_THEN_AGGREGATE, rows_per_batch=2)
    first = run_both(spec, tmp_path / "runs")
    assert first.stream == first.batch == []
    write_changelog(tmp_path / "orders", "002.json", EVENTS[:9])
    second = run_both(spec, tmp_path / "runs")
    assert second.stream == second.batch == run_both(spec, tmp_path / "fresh").stream != []


def test_a_multi_stage_query_runs_again_with_nothing_new_as_a_no_op_that_still_checks(spark, tmp_path):
    # The second run found no new version in the first stage's table: it must not read the
    # change feed from a version that does not exist yet.
    shutil.copytree(ROOT / "conf" / "queries" / "data" / "shipments", tmp_path / "data" / "shipments")
    shutil.copy(ROOT / "conf" / "queries" / "seed_000_dedup.yaml", tmp_path / "q.yaml")
    pipeline = Pipeline.open(tmp_path / "q.yaml", runs_dir=tmp_path / "runs")
    first = pipeline.run()
    again = pipeline.run()
    assert first.verdict == again.verdict == "pass"
    assert again.micro_batches == first.micro_batches  # no micro-batch ran the second time
    assert (again.stream_rows, again.changelog) == (first.stream_rows, first.changelog)
