"""The query's SQL text run by Spark over named tables, each registered as a temporary view.

Three callers: the batch job (the user's SQL on the source snapshots: the independent reference
shares nothing with the stream but the query text and the staged input), the stream job (the
result on empty input gives the sink its schema and first rows, so both sides have one schema),
and the diagnosis (the query re-run on a few suspect rows).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.changelog.columns import LIVE, VALID_TO
from jobs.changelog.frames import consumed_changes
from jobs.changelog.staging import staged_changelog
from jobs.changelog.versions import history
from jobs.errors import SqlError
from jobs.lookup.tables import lookup_tables
from jobs.plan import Plan, StagePlan
from jobs.plan.nodes import GroupAggregate, TemporalJoin
from jobs.plan.temporal_join import versions_view
from jobs.point import ConsistencyPoint
from jobs.runtime.layout import RunLayout


def run_sql(spark: SparkSession, plan: Plan | StagePlan, sources: dict[str, DataFrame]) -> DataFrame:
    """The plan's batch SQL (a stage's: its printed SQL) over `sources`, registered by name."""
    for name, frame in sources.items():
        frame.createOrReplaceTempView(name)
    try:
        return spark.sql(plan.sql)
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise SqlError(f"Spark rejected the SQL: {first}", where=str(plan.spec.spec_path)) from None


def version_views(spark: SparkSession, plan: Plan, layout: RunLayout, point: ConsistencyPoint) -> dict[str, DataFrame]:
    """The history of each table a temporal join reads FOR SYSTEM_TIME AS OF, by its view name,
    from the staged changelog up to the consistency point."""
    views = {}
    for table in versioned_tables(plan):
        source, staged = plan.spec.sources[table], staged_changelog(layout, table)
        assert source.event_time is not None, "the planner gives a versioned table an event time"
        changes = consumed_changes(spark, staged, point.rows_consumed(table))
        views[versions_view(table)] = history(changes, source.primary_key, source.event_time, staged.schema.names)
    return views


def versioned_tables(plan: Plan) -> list[str]:
    joins = [n for n in plan.root.walk() if isinstance(n, TemporalJoin)]
    return list(dict.fromkeys(j.versioned_table.table for j in joins))


def _empty_version_views(plan: Plan, sources: dict[str, DataFrame]) -> dict[str, DataFrame]:
    hidden = (F.lit(None).cast("timestamp").alias(VALID_TO), F.lit(True).alias(LIVE))
    return {versions_view(t): sources[t].select("*", *hidden) for t in versioned_tables(plan)}


def empty_sources(spark: SparkSession, plan: Plan) -> dict[str, DataFrame]:
    """The query's tables with no rows: its sources, and its lookups (see jobs/lookup/tables.py)."""
    sources = {s.table: spark.createDataFrame([], s.schema.spark_ddl()) for s in plan.sources}
    return {**sources, **lookup_tables(spark, plan, sources, empty=True), **_empty_version_views(plan, sources)}


def result_on_empty_input(spark: SparkSession, plan: Plan, stage: StagePlan) -> DataFrame:
    """A stage's result before any change arrives: its schema is the stage table's schema, and
    its rows (none, or a global aggregate's one row) are the table's first content."""
    return run_sql(spark, stage, empty_sources(spark, plan))


def first_content(spark: SparkSession, plan: Plan, stage: StagePlan) -> pa.Table:
    """The result on empty input as Arrow, in the types DataFrame.toArrow gives. Only a global
    aggregate answers empty input with a row (and a stage fed by one may pass it on); for a
    query without one the schema (Spark's analysis, no job) is the whole answer, which spares
    the run a Spark job of seconds before its first micro-batch."""
    result = result_on_empty_input(spark, plan, stage)
    if any(isinstance(node, GroupAggregate) and node.is_global for each in plan.stages for node in each.root.walk()):
        return result.toArrow()
    return to_arrow_schema(result.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC").empty_table()
