"""An interval join (plan/interval_join.py) on both engines: the regular join's rows, with a
state that ends, each row forgotten once the other side's watermark has passed its time plus the
bound (operators/join/expiry.py; on the spark engine, LiveRows' timers)."""

from __future__ import annotations

import pytest

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.plan.nodes import Join
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both, state_rows

SPEC = """
name: shipped
sql: |
  SELECT o.id AS order_id, s.id AS shipment_id, o.k AS k
  FROM orders o {kind} JOIN shipments s
  ON o.k = s.k AND o.ts BETWEEN s.ts - INTERVAL 10 SECONDS AND s.ts + INTERVAL 5 SECONDS
sources:
  orders:
    path: orders
    format: json
    schema: "id BIGINT, k BIGINT, ts TIMESTAMP"
    event_time: ts
    watermark: "2 seconds"
  shipments:
    path: shipments
    format: json
    schema: "id BIGINT, k BIGINT, ts TIMESTAMP"
    event_time: ts
    watermark: "2 seconds"
stream:
  rows_per_batch: 4
  engine: {engine}
"""


def at(second: int) -> str:
    return f"2026-11-21 09:{second // 60:02d}:{second % 60:02d}"


def _events(tmp_path, count: int = 60) -> None:
    """An order every 3 s and a shipment 4 s later, keys 1 to 3 in turn; every fifth order
    never ships."""
    orders = [{"id": i, "k": i % 3 + 1, "ts": at(3 * i)} for i in range(count)]
    shipments = [{"id": 1000 + i, "k": i % 3 + 1, "ts": at(3 * i + 4)} for i in range(count) if i % 5]
    write_changelog(tmp_path / "orders", "001.json", orders)
    write_changelog(tmp_path / "shipments", "001.json", shipments)


@pytest.mark.parametrize("kind", ["INNER", "LEFT"])
def test_an_interval_join_gives_the_joins_rows_and_forgets_what_no_row_to_come_can_match(spark, tmp_path, kind):
    _events(tmp_path)
    spec = write_spec(tmp_path, SPEC.format(kind=kind, engine="local"))
    plan = plan_query(load_spec(spec))
    join = next(node for node in plan.root.walk() if isinstance(node, Join))
    assert join.time_bounds is not None and join.time_bounds.lower.total_seconds() == -10
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan, Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    assert sum(row["__count"] for row in result.stream) > 40  # each shipped order matches its shipment
    state = result.layout.operator_state
    left, right = state_rows(state / "left"), state_rows(state / "right")
    assert left + right < 20, (left, right)  # of 108 rows, only the newest are still needed
    # The report's state figure is the live rows, after each micro-batch: it falls as rows go.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert held[-1] == left + right < max(held), held


def test_on_the_spark_engine_the_rows_leave_its_keyed_state_as_the_watermark_passes(spark, tmp_path):
    _events(tmp_path, count=30)
    spec = write_spec(tmp_path, SPEC.format(kind="LEFT", engine="spark"))
    plan = plan_query(load_spec(spec))
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan, Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    # Of 54 rows, the state never holds more than about two micro-batches' worth beyond the
    # local engine's (Spark's watermark trails lockstep's), and it falls as they go.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert max(held) < 40 and held[-1] < 20 and held[-1] < max(held), held


def test_a_join_over_an_updating_source_keeps_its_state(tmp_path):
    spec = write_spec(
        tmp_path,
        SPEC.format(kind="INNER", engine="local").replace(
            'format: json\n    schema: "id BIGINT, k',
            'format: changelog-json\n    primary_key: [id]\n    schema: "id BIGINT, k',
            1,
        ),
    )
    join = next(node for node in plan_query(load_spec(spec)).root.walk() if isinstance(node, Join))
    assert join.time_bounds is None  # a regular join, as Flink plans it over updates
