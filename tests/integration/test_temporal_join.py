"""A temporal join (plan/temporal_join.py) on both engines: each order with its key's rate as of
the order's time, deletions included, the same in stream and batch; and a state that ends, the
orders and versions no change still to come can reach let go (operators/join/temporal.py; on the
spark engine, LiveRows' timers)."""

from __future__ import annotations

import pytest

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both, state_rows

SPEC = """
name: priced
sql: |
  SELECT o.id AS order_id, o.k AS k, r.rate AS rate
  FROM orders o {kind} JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k
sources:
  orders:
    path: orders
    format: json
    schema: "id BIGINT, k BIGINT, ts TIMESTAMP"
    event_time: ts
    watermark: "2 seconds"
  rates:
    path: rates
    format: changelog-json
    schema: "k BIGINT, rate BIGINT, ts TIMESTAMP"
    primary_key: [k]
    event_time: ts
    watermark: "2 seconds"
stream:
  rows_per_batch: 5
  engine: {engine}
"""


def at(second: int) -> str:
    return f"2026-11-21 09:{second // 60:02d}:{second % 60:02d}"


def _rate_changes() -> list[tuple[str, int, int | None, int]]:
    """(kind, key, rate, second): each of keys 1 to 3 gets a new rate every 6 s; key 3's rate at
    63 s is deleted at once (a deletion at 63 s), and key 3 comes back at 75 s."""
    changes, live = [], {}
    for step in range(20):
        for k in (1, 2, 3):
            second, rate = 6 * step + k, 100 * k + step
            if k == 3 and step == 11:
                continue  # key 3 has no rate between 63 s and 75 s
            if k in live:
                changes.append(("-U", k, live[k], second - 6))
            changes.append(("+U" if k in live else "+I", k, rate, second))
            live[k] = rate
            if k == 3 and step == 10:
                changes.append(("-D", k, rate, second))
                del live[k]
    return changes


def _write(tmp_path) -> list[tuple[int, int, int | None]]:
    """The events, and the (order, key, rate) each order should get."""
    changes = _rate_changes()
    rates = [{"k": k, "rate": rate, "ts": at(second), "op": kind} for kind, k, rate, second in changes]
    orders = [{"id": i, "k": i % 3 + 1, "ts": at(3 * i + 2)} for i in range(40)]
    write_changelog(tmp_path / "rates", "001.json", rates)
    write_changelog(tmp_path / "orders", "001.json", orders)
    expected = []
    for order in orders:
        second = 3 * order["id"] + 2
        versions = [(s, kind, rate) for kind, k, rate, s in changes if k == order["k"] and s <= second and kind != "-U"]
        latest = versions[-1] if versions else None
        expected.append((order["id"], order["k"], None if latest is None or latest[1] == "-D" else latest[2]))
    return expected


@pytest.mark.parametrize("kind", ["INNER", "LEFT"])
def test_a_temporal_join_takes_the_version_at_each_rows_time_and_lets_go_of_the_rest(spark, tmp_path, kind):
    expected = _write(tmp_path)
    spec = write_spec(tmp_path, SPEC.format(kind=kind, engine="local"))
    plan = plan_query(load_spec(spec))
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan, Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    wanted = [row for row in expected if kind == "LEFT" or row[2] is not None]
    got = [(row["order_id"], row["k"], row["rate"]) for row in result.stream for _ in range(row["__count"])]
    assert sorted(got, key=str) == sorted(wanted, key=str)
    assert any(rate is None for _, k, rate in expected if k == 3)  # the deletion took key 3's rate away
    state = result.layout.operator_state
    orders, versions = state_rows(state / "left"), state_rows(state / "versions")
    # Of 40 orders and 59 versions. The orders' watermark ends at 102 s (it is the one their last
    # micro-batch was staged under): each key keeps its version before it and the 3 after it.
    assert orders < 10 and versions < 20, (orders, versions)
    held = [batch["state_rows"] for batch in report["micro_batches"]]  # the report's figure
    assert held[-1] == orders + versions < max(held), held


def test_on_the_spark_engine_the_orders_and_superseded_versions_leave_its_keyed_state(spark, tmp_path):
    expected = _write(tmp_path)
    spec = write_spec(tmp_path, SPEC.format(kind="LEFT", engine="spark"))
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    got = [(row["order_id"], row["k"], row["rate"]) for row in result.stream for _ in range(row["__count"])]
    assert sorted(got, key=str) == sorted(expected, key=str)
    # Of 40 orders and 59 versions: a few more than the local engine keeps stay (Spark's
    # watermark trails lockstep's), and the state falls as they go.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert held[-1] < 40 and held[-1] < max(held), held
