"""A stage table's first content, taken from the query's schema alone where the result on empty
input has no row, is exactly what running that result would give (schema, types and rows); and
the sink's Spark schema, derived from it without Spark, is the one Spark would give."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from jobs.plan import plan_query
from jobs.spark_sql import first_content, result_on_empty_input
from jobs.spec import load_spec
from jobs.stream.stage import spark_schema, with_sink_columns
from tests.conftest import ROOT, orders_spec

DEMO_SPECS = sorted((ROOT / "conf" / "queries").glob("*.yaml"))


def _same_as_running_it(spark, spec_path) -> list[int]:
    """Checks every stage of the spec's plan; returns each stage's number of first rows."""
    plan = plan_query(load_spec(spec_path))
    rows = []
    for stage in plan.stages:
        expected = result_on_empty_input(spark, plan, stage).toArrow()
        found = first_content(spark, plan, stage)
        assert found.schema == expected.schema, stage.name
        assert found.equals(expected), stage.name
        rows.append(found.num_rows)
    return rows


@pytest.mark.parametrize("spec_path", DEMO_SPECS, ids=lambda p: p.stem)
def test_first_content_of_every_demo_stage_is_the_result_on_empty_input(spark, spec_path):
    assert set(_same_as_running_it(spark, spec_path)) == {0}


@pytest.mark.parametrize(
    "sql, rows",
    [
        ("SELECT COUNT(*) AS n, SUM(income) AS total, AVG(CAST(income AS DECIMAL(10, 2))) AS mean FROM orders", [1]),
        ("SELECT n + 1 AS m FROM (SELECT COUNT(*) AS n FROM orders) WHERE n = 0", [1]),
        # a global aggregate's row passed on to the next stage
        ("SELECT n, COUNT(*) AS c FROM (SELECT COUNT(*) AS n FROM orders) GROUP BY n", None),
    ],
)
def test_a_global_aggregate_keeps_its_row_on_empty_input(spark, tmp_path, sql, rows):
    found = _same_as_running_it(spark, orders_spec(tmp_path, sql))
    assert found[0] == 1 and (rows is None or found == rows)


def _types_table():
    """One row of every column kind a sink can hold, one column declared NOT NULL."""
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("small", pa.int32()),
            ("f", pa.float32()),
            ("d", pa.decimal128(10, 2)),
            ("s", pa.string()),
            ("b", pa.binary()),
            ("day", pa.date32()),
            ("at", pa.timestamp("us", "UTC")),
            ("flag", pa.bool_()),
            ("xs", pa.list_(pa.float64())),
            ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("m", pa.map_(pa.string(), pa.int64())),
        ]
    )
    values = [
        1,
        1,
        1.5,
        Decimal("1.25"),
        "x",
        b"x",
        dt.date(2026, 1, 1),
        dt.datetime(2026, 1, 1),
        True,
        [1.0, None],
        {"a": 1, "b": "y"},
        [("k", 1)],
    ]
    return pa.Table.from_pydict({f.name: [v] for f, v in zip(schema, values)}, schema=schema)


def test_the_sink_schema_is_the_one_spark_gives_the_rows(spark):
    rows = _types_table()
    assert spark_schema(spark, rows) == spark.createDataFrame(rows.slice(0, 0)).schema
    assert not spark_schema(spark, rows)["id"].nullable  # a NOT NULL column stays so


@pytest.mark.parametrize("spec_path", DEMO_SPECS, ids=lambda p: p.stem)
def test_the_sink_schema_of_every_demo_stage_is_the_one_spark_gives(spark, spec_path):
    plan = plan_query(load_spec(spec_path))
    for stage in plan.stages:
        initial = with_sink_columns(first_content(spark, plan, stage), stage)
        assert spark_schema(spark, initial) == spark.createDataFrame(initial.slice(0, 0)).schema, stage.name
