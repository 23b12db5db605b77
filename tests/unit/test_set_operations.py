"""UNION, INTERSECT and EXCEPT (distinct) plan as the queries they are written as: SELECT
DISTINCT over a UNION ALL, and a group aggregate over the UNION ALL of the two sides, each row
marked with its side. The ALL forms of INTERSECT and EXCEPT are refused in one line."""

from __future__ import annotations

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.plan.nodes import GroupAggregate, UnionAll
from jobs.spec import load_spec
from tests.conftest import orders_spec

BIG = "SELECT pId, income FROM orders WHERE income > 5"
SMALL = "SELECT pId, income FROM orders WHERE income < 9"


def plan(tmp_path, sql, name="q"):
    return plan_query(load_spec(orders_spec(tmp_path / name, sql)))


def marked(right_side: str) -> str:
    return (
        "SELECT pId, income FROM ("
        f"SELECT *, 1 AS lockstep_in_left, 0 AS lockstep_in_right FROM ({BIG}) l UNION ALL "
        f"SELECT *, 0 AS lockstep_in_left, 1 AS lockstep_in_right FROM ({SMALL}) r) s GROUP BY pId, income "
        f"HAVING SUM(lockstep_in_left) > 0 AND SUM(lockstep_in_right) {right_side}"
    )


@pytest.mark.parametrize(
    "operation, written_as",
    [
        (f"{BIG} UNION {SMALL}", f"SELECT DISTINCT * FROM ({BIG} UNION ALL {SMALL}) u"),
        (f"{BIG} INTERSECT {SMALL}", marked("> 0")),
        (f"{BIG} EXCEPT {SMALL}", marked("= 0")),
    ],
)
def test_a_set_operation_plans_as_the_query_it_is_written_as(tmp_path, operation, written_as):
    planned = plan(tmp_path, operation, "operation")
    assert explain(planned) == explain(plan(tmp_path, written_as, "written"))
    aggregate = next(node for node in planned.root.walk() if isinstance(node, GroupAggregate))
    assert isinstance(aggregate.input, UnionAll)
    assert planned.sql.strip() == operation  # the batch job runs the operation as written


def test_set_operations_nest_with_intersect_first_as_in_spark(tmp_path):
    nested = plan(
        tmp_path, f"SELECT pId FROM orders UNION {BIG.replace(', income', '')} INTERSECT SELECT 1 AS pId FROM orders"
    )
    aggregates = [node for node in nested.root.walk() if isinstance(node, GroupAggregate)]
    assert len(aggregates) == 2  # the INTERSECT's, inside the UNION's DISTINCT


@pytest.mark.parametrize(
    "sql, message",
    [
        (f"{BIG} INTERSECT ALL {SMALL}", "INTERSECT ALL"),
        (f"{BIG} EXCEPT ALL {SMALL}", "EXCEPT ALL"),
        ("SELECT * FROM orders INTERSECT SELECT * FROM orders", "INTERSECT: name the first branch's columns"),
    ],
)
def test_what_a_set_operation_may_not_be(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message):
        plan(tmp_path, sql)
