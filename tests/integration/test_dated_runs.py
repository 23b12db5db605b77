"""Runs by logical date outside Airflow: a check of one date after another date's batch step
overwrote the batch table, and `lockstep rebuild` (after the query changed, every partition is
replayed into a fresh sink, date by date with a check each; the old run folder is kept until the
new one passes)."""

import shutil
from datetime import date

import pytest
import yaml
from deltalake import DeltaTable

from jobs.batch.job import run_batch
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import ROOT

DAILY = ROOT / "conf" / "queries" / "daily_orders.yaml"


def _spec(tmp_path, sql: str | None = None):
    shutil.copytree(
        ROOT / "conf" / "queries" / "data" / "daily_orders", tmp_path / "data" / "daily_orders", dirs_exist_ok=True
    )
    spec = yaml.safe_load(DAILY.read_text())
    if sql:
        spec["sql"] = sql
    path = tmp_path / "daily_orders.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return plan_query(load_spec(path))


def _streamed_until_the_20th(tmp_path) -> RunLayout:
    plan = _spec(tmp_path)
    layout = RunLayout.for_query(tmp_path / "runs", plan.spec.name)
    for day in (date(2026, 11, 19), date(2026, 11, 20)):
        assert Pipeline(plan, Settings(), layout, Progress(quiet=True)).run(day).to_json()["verdict"] == "pass"
    return layout


@pytest.mark.slow
def test_a_rebuild_replays_every_date_into_a_fresh_sink_and_then_drops_the_old(spark, tmp_path):
    layout = _streamed_until_the_20th(tmp_path)
    changed = _spec(
        tmp_path, "SELECT pId, COUNT(*) AS orders, SUM(income) AS income, MAX(income) AS top FROM orders GROUP BY pId"
    )
    reports = [r.to_json() for r in Pipeline(changed, Settings(), layout, Progress(quiet=True)).rebuild()]
    assert [(r["logical_date"], r["verdict"]) for r in reports] == [
        ("2026-11-19", "pass"),
        ("2026-11-20", "pass"),
        ("2026-11-21", "pass"),
    ]
    assert "top" in DeltaTable(str(layout.stream)).schema().to_arrow().names
    assert sorted(p.name for p in (layout.root / "history").iterdir()) == ["2026-11-19", "2026-11-20", "2026-11-21"]
    # The old run folder is gone; the run folder's lock file stays beside the new one.
    assert sorted(p.name for p in layout.root.parent.iterdir()) == [".daily_orders.lock", "daily_orders", "index.html"]


def test_a_failing_rebuild_puts_the_old_run_folder_back(spark, tmp_path):
    layout = _streamed_until_the_20th(tmp_path)
    before = DeltaTable(str(layout.stream)).to_pyarrow_table().to_pylist()
    changed = _spec(tmp_path, "SELECT order_id, pId, income * rand() AS income FROM orders")
    reports = [r.to_json() for r in Pipeline(changed, Settings(), layout, Progress(quiet=True)).rebuild()]
    assert [r["verdict"] for r in reports] == ["fail"]  # stops at the first failing date
    assert DeltaTable(str(layout.stream)).to_pyarrow_table().to_pylist() == before
    assert (layout.state / "points" / "2026-11-20.json").exists()
    kept = [p.name for p in layout.root.parent.iterdir() if p.name.startswith("daily_orders.failed-rebuild-")]
    assert len(kept) == 1


def test_a_check_recomputes_a_batch_result_that_another_date_overwrote(spark, tmp_path):
    # Airflow may run the next date's stream and batch before this date's check.
    plan = _spec(tmp_path)
    layout = RunLayout.for_query(tmp_path / "runs", plan.spec.name)
    quiet, days = Progress(quiet=True), (date(2026, 11, 19), date(2026, 11, 20))
    for day in days:
        Pipeline(plan, Settings(), layout, quiet).stream(day)
    for day in days:
        run_batch(plan, Settings(), layout, quiet, day)
    report = Pipeline(plan, Settings(), layout, quiet).check(days[0]).to_json()
    assert report["verdict"] == "pass" and report["rechecked_by_time_travel"]
    assert report["batch_rows"] == report["stream_rows"] == 2
