"""A stage table's first content, taken from the query's schema alone where the result on empty
input has no row, is exactly what running that result would give (schema, types and rows)."""

import pytest

from jobs.plan import plan_query
from jobs.spark_sql import first_content, result_on_empty_input
from jobs.spec import load_spec
from tests.conftest import ROOT, orders_spec

DEMO_SPECS = sorted((ROOT / "conf" / "queries").glob("*.yaml"))


def _stages(spec_path):
    plan = plan_query(load_spec(spec_path))
    return [(plan, stage) for stage in plan.stages]


@pytest.mark.parametrize("spec_path", DEMO_SPECS, ids=lambda p: p.stem)
def test_first_content_of_every_demo_stage_is_the_result_on_empty_input(spark, spec_path):
    for plan, stage in _stages(spec_path):
        expected = result_on_empty_input(spark, plan, stage).toArrow()
        found = first_content(spark, plan, stage)
        assert found.schema == expected.schema, stage.name
        assert found.num_rows == expected.num_rows == 0, stage.name


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) AS n, SUM(income) AS total, AVG(CAST(income AS DECIMAL(10, 2))) AS mean FROM orders",
    "SELECT n + 1 AS m FROM (SELECT COUNT(*) AS n FROM orders) WHERE n = 0",
])
def test_a_global_aggregate_keeps_its_one_row_on_empty_input(spark, tmp_path, sql):
    [(plan, stage)] = _stages(orders_spec(tmp_path, sql))
    expected = result_on_empty_input(spark, plan, stage).toArrow()
    found = first_content(spark, plan, stage)
    assert found.num_rows == 1
    assert found.equals(expected)
