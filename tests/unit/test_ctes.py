"""WITH ... AS is only syntax: a query with common table expressions plans as the same query with
each name replaced by its query in FROM, and the batch job runs the WITH as written."""

from __future__ import annotations

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.spec import load_spec
from tests.conftest import orders_spec

TOTALS = "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId"


def plan(tmp_path, sql, name="q"):
    return plan_query(load_spec(orders_spec(tmp_path / name, sql, name="q")))


@pytest.mark.parametrize(
    "with_ctes, inlined",
    [
        (
            f"WITH t AS ({TOTALS}) SELECT pId, total FROM t WHERE total > 10",
            f"SELECT pId, total FROM ({TOTALS}) t WHERE total > 10",
        ),
        (  # a later name reads an earlier one, and one name is read twice
            f"WITH t AS ({TOTALS}), big AS (SELECT pId FROM t WHERE total > 10) "
            "SELECT b.pId, t.total FROM big b JOIN t ON b.pId = t.pId",
            f"SELECT b.pId, t.total FROM (SELECT pId FROM ({TOTALS}) t WHERE total > 10) b "
            f"JOIN ({TOTALS}) t ON b.pId = t.pId",
        ),
        (  # a deduplication in a WITH
            "WITH latest AS (SELECT order_id, pId, income, ROW_NUMBER() OVER (PARTITION BY order_id "
            "ORDER BY income DESC) AS rn FROM orders) SELECT pId, COUNT(*) AS n FROM latest WHERE rn = 1 GROUP BY pId",
            "SELECT pId, COUNT(*) AS n FROM (SELECT order_id, pId, income, ROW_NUMBER() OVER (PARTITION BY order_id "
            "ORDER BY income DESC) AS rn FROM orders) latest WHERE rn = 1 GROUP BY pId",
        ),
    ],
)
def test_a_query_with_ctes_plans_as_the_query_with_them_written_in_from(tmp_path, with_ctes, inlined):
    assert explain(plan(tmp_path, with_ctes, "with")) == explain(plan(tmp_path, inlined, "inlined"))


def test_the_batch_job_runs_the_with_as_written(tmp_path):
    sql = f"WITH t AS ({TOTALS}) SELECT pId, total FROM t"
    assert plan(tmp_path, sql).sql.strip() == sql


@pytest.mark.parametrize(
    "sql, message",
    [
        (f"WITH RECURSIVE t AS ({TOTALS}) SELECT pId FROM t", "WITH RECURSIVE"),
        (f"SELECT pId FROM (WITH t AS ({TOTALS}) SELECT pId FROM t) s", "WITH inside a subquery"),
    ],
)
def test_what_a_with_may_not_be(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message):
        plan(tmp_path, sql)
