"""Scheduled runs over dated partitions: a backfill of three dates leaves one report per date at
the right consistency point, and re-running a past date re-checks it by time travel."""

import json
from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable

from tests.conftest import ROOT

DATES = ["2026-11-19", "2026-11-20", "2026-11-21"]


def _run(dag, day: str):
    run = dag.test(logical_date=datetime.fromisoformat(day).replace(tzinfo=UTC))
    assert str(run.state) in ("success", "DagRunState.SUCCESS"), day
    return run


@pytest.mark.slow
def test_a_backfill_leaves_one_report_per_date_and_a_past_date_is_rechecked_by_time_travel(
    spark, airflow_db, tmp_path, monkeypatch
):
    runs = tmp_path / "runs"
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(runs))
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("lockstep_daily_orders")
    assert dag.schedule == "@daily" and dag.max_active_runs == 1
    for day in DATES:  # what `airflow backfill create` runs, in order
        _run(dag, day)
    query = runs / "daily_orders"
    reports = {day: json.loads((query / "history" / day / "report.json").read_text()) for day in DATES}
    assert [r["verdict"] for r in reports.values()] == ["pass"] * 3
    assert [r["logical_date"] for r in reports.values()] == DATES
    # Each date's point: the changelog rows of the partitions up to it, and the sink at that time.
    assert [r["consistency_point"]["sources"]["orders"]["rows"] for r in reports.values()] == [3, 7, 10]
    versions = [r["consistency_point"]["sink_version"] for r in reports.values()]
    assert versions == sorted(set(versions))
    assert [r["stream_rows"] for r in reports.values()] == [2, 2, 3]
    sink_version = DeltaTable(str(query / "stream")).version()

    (query / "history" / DATES[0] / "report.json").unlink()
    _run(dag, DATES[0])
    again = json.loads((query / "history" / DATES[0] / "report.json").read_text())
    assert again["rechecked_by_time_travel"] and again["verdict"] == "pass"
    assert again["consistency_point"] == reports[DATES[0]]["consistency_point"]
    assert again["stream_rows"] == 2 and again["batch_rows"] == 2
    assert DeltaTable(str(query / "stream")).version() == sink_version  # nothing re-streamed
    assert json.loads((query / "report.json").read_text())["logical_date"] == DATES[0]
