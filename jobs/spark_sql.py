"""The query's SQL text run by Spark over named tables, each registered as a temporary view.

Three callers: the batch job (the user's SQL on the source snapshots: the independent reference
shares nothing with the stream but the query text and the staged input), the stream job (the
result on empty input gives the sink its schema and first rows, so both sides have one schema),
and the diagnosis (the query re-run on a few suspect rows).
"""

from __future__ import annotations

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from jobs.errors import SqlError
from jobs.lookup.tables import lookup_tables
from jobs.plan import Plan, StagePlan


def run_sql(spark: SparkSession, plan: Plan | StagePlan, sources: dict[str, DataFrame]) -> DataFrame:
    """The plan's batch SQL (a stage's: its printed SQL) over `sources`, registered by name."""
    for name, frame in sources.items():
        frame.createOrReplaceTempView(name)
    try:
        return spark.sql(plan.sql)
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise SqlError(f"Spark rejected the SQL: {first}", where=str(plan.spec.spec_path)) from None


def empty_sources(spark: SparkSession, plan: Plan) -> dict[str, DataFrame]:
    """The query's tables with no rows: its sources, and its lookups (see jobs/lookup/tables.py)."""
    sources = {s.table: spark.createDataFrame([], s.schema.spark_ddl()) for s in plan.sources}
    return {**sources, **lookup_tables(spark, plan, sources, empty=True)}


def result_on_empty_input(spark: SparkSession, plan: Plan, stage: StagePlan) -> DataFrame:
    """A stage's result before any change arrives: its schema is the stage table's schema, and
    its rows (none, or a global aggregate's one row) are the table's first content."""
    return run_sql(spark, stage, empty_sources(spark, plan))
