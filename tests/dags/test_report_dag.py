"""The daily report DAG: it rebuilds the index, and fails loudly when a query's latest verdict is
fail (naming the query and its page)."""

from datetime import UTC, datetime

from expectations.report import publish
from tests.conftest import ROOT
from tests.report.conftest import FAILING, OLD_PASSING


def _run_report_dag(monkeypatch, runs):
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(runs))
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("lockstep_reports")
    assert dag.schedule == "@daily" and dag.task_ids == ["rebuild_reports"]
    run = dag.test(logical_date=datetime(2026, 11, 22, tzinfo=UTC))
    return str(run.state).rsplit(".", 1)[-1].lower()


def test_the_report_dag_rebuilds_the_index_and_passes_when_every_query_passes(airflow_db, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    publish(OLD_PASSING, runs / "orders_per_product")
    (runs / "index.html").unlink()
    assert _run_report_dag(monkeypatch, runs) == "success"
    assert "orders_per_product" in (runs / "index.html").read_text()


def test_the_report_dag_fails_when_a_latest_verdict_is_fail(airflow_db, tmp_path, monkeypatch, capfd):
    runs = tmp_path / "runs"
    publish(OLD_PASSING, runs / "other_query")
    publish(FAILING, runs / "orders_per_product")
    assert _run_report_dag(monkeypatch, runs) == "failed"
    out, err = capfd.readouterr()
    assert "latest verdict is fail for 1 of 2 queries" in out + err
    assert f"orders_per_product ({runs / 'orders_per_product' / 'report.html'})" in out + err
