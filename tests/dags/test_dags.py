"""The DAGs themselves: they import, have the right shape, and run end to end."""

import json
from datetime import UTC, datetime

import pytest
import yaml

from tests.conftest import ROOT, late_event_spec

SPECS = sorted((ROOT / "conf" / "queries").glob("*.yaml"))
DAG_FILES = [ROOT / "dags" / "lockstep_reports.py", ROOT / "dags" / "lockstep_queries.py"]


def test_the_dag_folder_imports_without_errors(dag_bag):
    assert dag_bag.import_errors == {}


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=[f.stem for f in DAG_FILES])
def test_each_dag_file_loads_on_its_own(airflow_db, dag_file):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dag_file))
    assert bag.import_errors == {} and bag.dag_ids
    assert all(dag.max_active_runs == 1 and "lockstep" in dag.tags for dag in bag.dags.values())


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_each_query_spec_has_a_stream_batch_check_dag(dag_bag, spec):
    name = yaml.safe_load(spec.read_text())["name"]
    dag = dag_bag.get_dag(f"lockstep_{name}")
    assert dag is not None
    assert sorted(dag.task_ids) == ["batch", "check", "stream"]
    assert dag.get_task("stream").downstream_task_ids == {"batch"}
    assert dag.get_task("batch").downstream_task_ids == {"check"}
    assert dag.get_task("check").downstream_task_ids == set()
    assert dag.max_active_runs == 1 and not dag.catchup
    assert all(task.pool == "lockstep_spark" for task in dag.tasks)
    assert dag.get_task("stream").retries == 2 and dag.get_task("stream").depends_on_past
    assert dag.params["rebuild"] is False


def test_parsing_the_dags_imports_neither_spark_nor_great_expectations(airflow_db):
    import os
    import subprocess
    import sys

    probe = (
        "import runpy, sys; runpy.run_path('dags/lockstep_queries.py'); "
        "runpy.run_path('dags/lockstep_reports.py'); "
        "print(sorted(m for m in ('pyspark', 'great_expectations', 'deltalake') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


# seed 004: a bounded source closes its last window at the end of the input (6 windows, not 5).
@pytest.mark.slow
@pytest.mark.parametrize(
    "query, stream_rows", [("income_per_product", 3), ("seed_004_windows", 6), ("seed_003_join", 2)]
)
def test_a_query_dag_runs_end_to_end_and_leaves_a_passing_report(
    spark, airflow_db, tmp_path, monkeypatch, query, stream_rows
):
    import json

    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(tmp_path / "runs"))
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag(f"lockstep_{query}")
    run = dag.test(logical_date=datetime(2026, 11, 21, tzinfo=UTC))
    assert str(run.state) in ("success", "DagRunState.SUCCESS")
    report = json.loads((tmp_path / "runs" / query / "report.json").read_text())
    assert report["verdict"] == "pass"
    assert report["stream_rows"] == report["batch_rows"] == stream_rows
    # The passing check recorded an event on the sink's Asset, and its link is the plugin's URL.
    (event,) = _asset_events(f"lockstep.{query}", run.run_id)
    assert event.extra == {
        "verdict": "pass",
        "logical_date": "2026-11-21",
        "sink_version": report["consistency_point"]["sink_version"],
    }
    assert event.asset.uri == f"lockstep://{query}/sink"
    assert event.asset.extra["table"] == (tmp_path / "runs" / query / "stream").resolve().as_uri()
    link = run.get_task_instance("check").xcom_pull(task_ids="check", key="_link_ReportLink")
    assert link == f"/lockstep/runs/{query}/history/2026-11-21/report.html"


def _asset_events(name: str, run_id: str) -> list:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from sqlalchemy.orm import joinedload

    with create_session() as session:
        query = (
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.name == name, AssetEvent.source_run_id == run_id)
            .options(joinedload(AssetEvent.asset))
        )
        return list(session.scalars(query).unique())


@pytest.mark.slow
def test_a_check_that_finds_a_disagreement_fails_its_task_and_still_publishes_the_report(
    spark, airflow_db, tmp_path, monkeypatch, capfd
):
    """Stream and batch disagree for real (a late event): stream and batch succeed, the check
    task fails with the diagnosis, its report and link are there, no Asset event is recorded, and
    the reports DAG then fails naming the query while it rebuilds the index."""
    from airflow.dag_processing.dagbag import DagBag

    queries, runs = tmp_path / "queries", tmp_path / "runs"
    late_event_spec(queries, name="late")
    monkeypatch.setenv("LOCKSTEP_QUERIES", str(queries))
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(runs))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    run = bag.get_dag("lockstep_late").test(logical_date=datetime(2026, 11, 21, tzinfo=UTC))
    states = {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in run.get_task_instances()}
    assert states == {"stream": "success", "batch": "success", "check": "failed"}
    out, err = capfd.readouterr()
    assert "late: stream and batch disagree (expect_no_mismatched_values)" in out + err
    report = json.loads((runs / "late" / "history" / "2026-11-21" / "report.json").read_text())
    assert report["verdict"] == "fail" and report["diagnosis"]["explained_rows"] == 1
    assert (runs / "late" / "history" / "2026-11-21" / "report.html").is_file()
    link = run.get_task_instance("check").xcom_pull(task_ids="check", key="_link_ReportLink")
    assert link == "/lockstep/runs/late/history/2026-11-21/report.html"
    assert _asset_events("lockstep.late", run.run_id) == []

    (runs / "index.html").unlink()
    reports = bag.get_dag("lockstep_reports").test(logical_date=datetime(2026, 11, 22, tzinfo=UTC))
    assert str(reports.state).rsplit(".", 1)[-1].lower() == "failed"
    assert "latest verdict is fail for 1 of 1 queries: late" in "".join(capfd.readouterr())
    assert "late" in (runs / "index.html").read_text()
