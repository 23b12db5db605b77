"""The metric lockstep's own expectations are judged by: the rows their query returns (the first
MAX_RESULT_RECORDS of them) and how many there are, from one Spark job.

Great Expectations' UnexpectedRowsExpectation asks for two metrics, the query's row count and its
first rows, and the Spark engine runs the query once for each. A Spark job costs 0.15-0.25 s
however small its data on two cores, and a check runs a dozen of these queries: half of its
Spark jobs were the second run of a query already run. Here the count travels with the rows, as
a window over the whole result (`COUNT(*) OVER ()`): when the query returns nothing (a passing
expectation) the job returns nothing and the count is 0. A check that fails on millions of rows
pays for it: the window gathers them in one partition, counted by one task.

Registered with Great Expectations when this module is imported (its metric provider class
does that), as every custom metric is.
"""

from __future__ import annotations

from typing import Any, ClassVar

from great_expectations.constants import MAX_RESULT_RECORDS
from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.execution_engine import SparkDFExecutionEngine
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.query_metric_provider import QueryMetricProvider
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

METRIC = "lockstep_unexpected_rows.sample"
ROW_COUNT = "__lockstep_unexpected_row_count"


def first_rows_and_count(rows: DataFrame, limit: int) -> tuple[list[dict], int]:
    """Up to `limit` of `rows` and how many there are in all, in one Spark job."""
    counted = rows.select("*", F.count(F.lit(1)).over(Window.partitionBy()).alias(ROW_COUNT))
    found = counted.limit(limit).collect()
    total = found[0][ROW_COUNT] if found else 0
    return [{k: v for k, v in row.asDict().items() if k != ROW_COUNT} for row in found], total


class UnexpectedRowsSample(QueryMetricProvider):
    """(first rows, row count) of an unexpected-rows query over the validated data ({batch})."""

    metric_name = METRIC
    value_keys = ("unexpected_rows_query",)
    query_param_name: ClassVar[str] = "unexpected_rows_query"

    @metric_value(engine=SparkDFExecutionEngine)
    def _spark(
        cls,
        execution_engine: SparkDFExecutionEngine,
        metric_domain_kwargs: dict,
        metric_value_kwargs: dict,
        metrics: dict[str, Any],
        runtime_configuration: dict,
    ) -> tuple[list[dict], int]:
        frame, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE)
        frame.createOrReplaceTempView("tmp_view")
        query = cls._format_query(cls._get_query_from_metric_value_kwargs(metric_value_kwargs), batch="tmp_view")
        return first_rows_and_count(execution_engine.spark.sql(query), MAX_RESULT_RECORDS)
