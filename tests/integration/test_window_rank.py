"""A Top-N per window over a window's rows without an aggregate (Flink's window Top-N): each
window's largest orders, the same in stream and batch; a late order is left out and explains the
difference; and a state that ends, the windows the watermark closed let go
(operators/deduplicate/window_expiry.py; on the spark engine, LiveRows' timers)."""

from __future__ import annotations

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.state.live_state import COMPACT_EVERY
from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both, state_rows

SPEC = """
name: largest_per_minute
sql: |
  SELECT minute, id, amount FROM (
    SELECT minute, id, amount, ROW_NUMBER() OVER (PARTITION BY minute, minute_end ORDER BY amount DESC) AS rn
    FROM (SELECT window(ts, '1 minute').start AS minute, window(ts, '1 minute').end AS minute_end, id, amount
          FROM orders) w
  ) r WHERE rn <= 2
sources:
  orders:
    path: orders
    format: json
    schema: "id BIGINT, amount BIGINT, ts TIMESTAMP"
    event_time: ts
    watermark: "2 seconds"
stream:
  rows_per_batch: 4
"""
MINUTES = 30


def at(second: int) -> str:
    return f"2026-11-21 09:{second // 60:02d}:{second % 60:02d}"


def _orders(late: bool, minutes: int = MINUTES) -> list[dict]:
    """Four orders a minute (amounts differ), and with `late` one large order for minute 3 sent
    after minute 20's: its window has long closed."""
    orders = [
        {"id": 4 * m + i, "amount": (7 * m + 3 * i) % 11 + 10 * i, "ts": at(60 * m + 15 * i + 1)}
        for m in range(minutes)
        for i in range(4)
    ]
    if late:
        orders.insert(4 * 21, {"id": 999, "amount": 1000, "ts": at(3 * 60 + 30)})
    return orders


def _largest_two(orders: list[dict]) -> list[tuple[int, int]]:
    by_minute: dict[str, list[dict]] = {}
    for order in orders:
        by_minute.setdefault(order["ts"][:16], []).append(order)
    return sorted(
        (o["id"], o["amount"]) for rows in by_minute.values() for o in sorted(rows, key=lambda o: -o["amount"])[:2]
    )


def _run(tmp_path, orders: list[dict], engine: str = "local"):
    """Stream, batch and check over the orders: (the outcome, the report, the sink's (id, amount))."""
    write_changelog(tmp_path / "orders", "001.json", orders)
    spec = write_spec(tmp_path, SPEC + f"  engine: {engine}\n")
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    got = sorted((row["id"], row["amount"]) for row in result.stream for _ in range(row["__count"]))
    return result, report, got


def test_each_windows_largest_orders_and_a_state_that_lets_closed_windows_go(spark, tmp_path):
    orders = _orders(late=False)
    result, report, got = _run(tmp_path, orders)
    assert report["verdict"] == "pass"
    assert got == _largest_two(orders)
    # The report's state figure after each micro-batch: the live rows; it falls at each fold.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert held[-1] == state_rows(result.layout.operator_state / "input"), held
    assert any(b < a for a, b in zip(held, held[1:])), held
    # Of 120 orders, the state keeps what the micro-batches since its last fold brought (the
    # closed windows' rows go when it is folded) and the windows still open: 4 orders a batch.
    kept = state_rows(result.layout.operator_state / "input")
    assert kept <= 4 * (COMPACT_EVERY + 1) < len(orders) / 3, kept


def test_on_the_spark_engine_a_closed_windows_rows_leave_its_keyed_state(spark, tmp_path):
    orders = _orders(late=False, minutes=12)
    _, report, got = _run(tmp_path, orders, engine="spark")
    assert report["verdict"] == "pass"
    assert got == _largest_two(orders)
    # A micro-batch brings a minute's 4 orders; Spark's watermark trails lockstep's by up to two
    # micro-batches, so a few windows are held, never the 48 orders.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert max(held) <= 4 * 4 and held[-1] < len(orders) / 3, held


def test_a_late_order_is_left_out_and_explains_the_difference(spark, tmp_path):
    orders = _orders(late=True)
    _, report, got = _run(tmp_path, orders)
    assert report["verdict"] == "fail"
    assert report["late_events"] == 1 and report["late_explanation"]["explains"] == "all"
    assert got == _largest_two([o for o in orders if o["id"] != 999])
