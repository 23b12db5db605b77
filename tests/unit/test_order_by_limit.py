"""ORDER BY ... LIMIT n plans as the global Top-N it is: the SELECT ranked by ROW_NUMBER() with no
partition, its rows numbered n or less, the row number not selected. What would keep rows by
arrival, or cannot be ranked by one column, is refused in one line."""

from __future__ import annotations

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.plan.nodes import Deduplicate
from jobs.spec import load_spec
from tests.conftest import orders_spec


def plan(tmp_path, sql, name="q"):
    return plan_query(load_spec(orders_spec(tmp_path / name, sql)))


@pytest.mark.parametrize(
    "sql, ranked",
    [
        (
            "SELECT order_id, income FROM orders WHERE income > 5 ORDER BY order_id DESC LIMIT 3",
            "SELECT order_id, income FROM (SELECT order_id, income, ROW_NUMBER() OVER (ORDER BY order_id DESC) "
            "AS lockstep_rank FROM orders WHERE income > 5) t WHERE lockstep_rank <= 3",
        ),
        (
            "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId ORDER BY total LIMIT 2",
            "SELECT pId, total FROM (SELECT pId, SUM(income) AS total, ROW_NUMBER() OVER (ORDER BY total) "
            "AS lockstep_rank FROM orders GROUP BY pId) t WHERE lockstep_rank <= 2",
        ),
    ],
)
def test_order_by_limit_plans_as_a_top_n_without_a_partition(tmp_path, sql, ranked):
    planned = plan(tmp_path, sql, "limit")
    assert explain(planned).replace("limit", "q") == explain(plan(tmp_path, ranked, "q"))
    top = next(node for node in planned.root.walk() if isinstance(node, Deduplicate))
    assert top.keys == () and top.limit == int(sql[-1])
    assert "lockstep_rank" not in planned.root.output_names


@pytest.mark.parametrize(
    "sql, message",
    [
        ("SELECT order_id FROM orders LIMIT 3", "without ORDER BY the rows kept would depend on arrival"),
        ("SELECT * FROM orders ORDER BY order_id LIMIT 3", "name the columns"),
        ("SELECT order_id FROM orders ORDER BY pId, order_id LIMIT 3", "orders by one column"),
        (
            "SELECT order_id FROM (SELECT order_id FROM orders ORDER BY order_id LIMIT 3) s",
            "LIMIT inside a subquery",
        ),
    ],
)
def test_a_limit_that_is_not_a_top_n_is_refused_in_one_line(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message) as refused:
        plan(tmp_path, sql)
    assert "\n" not in str(refused.value).split("\n       ")[0]
