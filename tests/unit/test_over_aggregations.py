"""OVER aggregations and LAG (plan/over.py): one node under the SELECT's own items, and what
Flink's planner refuses refused in one line, with Flink's reason."""

from __future__ import annotations

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.plan.nodes import Calc, OverAggregate
from jobs.spec import load_spec
from tests.conftest import write_spec

SPEC = """
name: running
sql: {sql}
sources:
  t:
    path: t
    format: {format}
    schema: "id BIGINT, k BIGINT, x BIGINT, ts TIMESTAMP"
    primary_key: [id]
    event_time: ts
    watermark: "2 seconds"
stream:
  engine: {engine}
"""
WINDOW = "PARTITION BY k ORDER BY ts"


def plan(tmp_path, sql, format="json", engine="local"):
    return plan_query(load_spec(write_spec(tmp_path, SPEC.format(sql=sql, format=format, engine=engine))))


def test_over_calls_become_one_node_below_the_selects_own_items(tmp_path):
    sql = (
        f"SELECT id, SUM(x) OVER ({WINDOW} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s, "
        f"x - LAG(x) OVER ({WINDOW}) AS d FROM t WHERE x > 0"
    )
    planned = plan(tmp_path, sql)
    over = next(n for n in planned.root.walk() if isinstance(n, OverAggregate))
    assert (over.partition_keys, over.order_col, over.event_time) == (("k",), "ts", True)
    assert [name for name, _ in over.calls] == ["__over0", "__over1"]
    assert isinstance(over.input, Calc) and over.input.condition is not None  # WHERE goes first
    above = next(n for n in planned.root.walk() if isinstance(n, Calc) and n.input is over)
    assert dict(above.projections)["d"].sql() == "x - __over1"
    assert "OverAggregate(partitionBy=[k], orderBy=[ts ASC], window=[ROWS BETWEEN 2 PRECEDING" in explain(planned)


def test_a_running_aggregate_by_another_column_takes_an_updating_input(tmp_path):
    planned = plan(tmp_path, "SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY id) AS s FROM t", "changelog-json")
    assert not next(n for n in planned.root.walk() if isinstance(n, OverAggregate)).event_time


@pytest.mark.parametrize(
    "sql, format, message",
    [
        (f"SELECT id, SUM(x) OVER ({WINDOW}) AS s FROM t", "changelog-json", "needs an insert-only input"),
        ("SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY ts DESC) AS s FROM t", "json", "orders ascending"),
        ("SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY ts, id) AS s FROM t", "json", "orders by one column"),
        (
            f"SELECT id, SUM(x) OVER ({WINDOW} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s FROM t",
            "json",
            "ends at the CURRENT ROW",
        ),
        (
            "SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t",
            "json",
            "has an unbounded frame",
        ),
        (
            f"SELECT id, SUM(x) OVER ({WINDOW}) AS s, MAX(x) OVER (PARTITION BY id ORDER BY ts) AS m FROM t",
            "json",
            "one window per SELECT",
        ),
        (f"SELECT k, SUM(x) OVER ({WINDOW}) AS s, COUNT(*) AS n FROM t GROUP BY k", "json", "aggregate in a subquery"),
        (f"SELECT id, FIRST_VALUE(x) OVER ({WINDOW}) AS f FROM t", "json", "a window function lockstep does not run"),
        (f"SELECT id, LEAD(x) OVER ({WINDOW}) AS f FROM t", "json", "Flink SQL refuses it in streaming mode too"),
        ("SELECT id, LAG(x) OVER (PARTITION BY k ORDER BY id) AS p FROM t", "json", "its job fails"),
    ],
)
def test_what_flink_refuses_is_refused_in_one_line(tmp_path, sql, format, message):
    with pytest.raises(SqlError, match=message) as refused:
        plan(tmp_path, sql, format)
    assert "\n" not in refused.value.message


def test_the_spark_engine_runs_over_aggregations_on_its_keyed_state(tmp_path):
    planned = plan(tmp_path, f"SELECT id, SUM(x) OVER ({WINDOW}) AS s FROM t", engine="spark")
    assert any(isinstance(node, OverAggregate) for node in planned.root.walk())


def test_a_named_window_plans_as_the_window_written_out(tmp_path):
    frame = f"{WINDOW} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"
    named = plan(tmp_path / "named", f"SELECT id, SUM(x) OVER w AS s, MAX(x) OVER w AS m FROM t WINDOW w AS ({frame})")
    inline = plan(tmp_path / "inline", f"SELECT id, SUM(x) OVER ({frame}) AS s, MAX(x) OVER ({frame}) AS m FROM t")
    assert explain(named) == explain(inline)
    with pytest.raises(SqlError, match="OVER v: no WINDOW v AS"):
        plan(tmp_path / "unknown", f"SELECT id, SUM(x) OVER v AS s FROM t WINDOW w AS ({frame})")
