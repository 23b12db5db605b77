"""A scheduled query over a Kafka topic: the DAG run for logical date D reads the topic up to the
offsets at D's end (found by the messages' timestamps), each date's report shows its offsets per
partition, and a backfill of a past date re-checks it at that date's offsets. The bootstrap
servers come from the environment, not the spec."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import yaml

from jobs.kafka.servers import VARIABLE
from tests.conftest import ROOT


def _order(order_id: int, pid: int, income: int) -> tuple[str, str]:
    after = {"order_id": order_id, "pId": pid, "income": income}
    return str(order_id), json.dumps({"before": None, "after": after, "op": "c"})


def _run(dag, day: str):
    run = dag.test(logical_date=datetime.fromisoformat(day).replace(tzinfo=UTC))
    assert str(run.state) in ("success", "DagRunState.SUCCESS"), day
    return run


@pytest.mark.slow
def test_a_dag_run_reads_the_topic_up_to_the_offsets_at_its_dates_end(spark, airflow_db, kafka, tmp_path, monkeypatch):
    kafka.create_topic("dag.orders", partitions=2)
    kafka.produce("dag.orders", [_order(1, 1, 5), _order(2, 2, 3)], at=datetime(2026, 11, 19, 8, tzinfo=UTC))
    kafka.produce("dag.orders", [_order(3, 1, 4)], at=datetime(2026, 11, 20, 23, 59, tzinfo=UTC))
    kafka.produce("dag.orders", [_order(4, 2, 1)], at=datetime(2026, 11, 21, 0, 0, tzinfo=UTC))  # the next day's
    spec = tmp_path / "queries" / "topic_totals.yaml"
    spec.parent.mkdir()
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "topic_totals",
                "sql": "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId",
                "schedule": "@daily",
                "sources": {
                    "orders": {
                        "kafka": {"topic": "dag.orders"},
                        "format": "debezium-json",
                        "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
                        "primary_key": ["order_id"],
                    }
                },
            }
        )
    )
    runs = tmp_path / "runs"
    monkeypatch.setenv(VARIABLE, kafka.bootstrap)
    monkeypatch.setenv("LOCKSTEP_QUERIES", str(spec.parent))
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(runs))
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags" / "lockstep_queries.py")).get_dag("lockstep_topic_totals")
    for day in ("2026-11-19", "2026-11-20"):
        _run(dag, day)
    history = runs / "topic_totals" / "history"
    reports = {day: json.loads((history / day / "report.json").read_text()) for day in ("2026-11-19", "2026-11-20")}
    positions = {day: r["consistency_point"]["sources"]["orders"] for day, r in reports.items()}
    assert [r["verdict"] for r in reports.values()] == ["pass", "pass"]
    assert [p["rows"] for p in positions.values()] == [2, 3]  # order 4 is stamped on the 21st
    assert sum(positions["2026-11-20"]["offsets"].values()) == 3
    assert "partition 0 \u2192" in (history / "2026-11-20" / "report.html").read_text()

    (history / "2026-11-19" / "report.json").unlink()
    _run(dag, "2026-11-19")
    again = json.loads((history / "2026-11-19" / "report.json").read_text())
    assert again["verdict"] == "pass" and again["rechecked_by_time_travel"]
    assert again["consistency_point"]["sources"]["orders"] == positions["2026-11-19"]
