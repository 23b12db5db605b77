"""A versioned table's history, for the batch's point-in-time joins (plan/temporal_join.py): one
row per version, from the staged changelog up to the consistency point.

A +I or +U row is a version at its own time; a -D is a deletion at the deleted row's time; a -U is
no version (Flink drops it before the join). Of two changes of a key at one time the later wins.
Each version holds until the next one of its key starts (VALID_TO, NULL for the latest).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import KIND, SEQ
from jobs.changelog.frames import consumed_changes
from jobs.changelog.kinds import RowKind
from jobs.changelog.staging import staged_changelog
from jobs.plan import Plan
from jobs.plan.nodes import ChangelogSource, TemporalJoin
from jobs.plan.temporal_join import LIVE, VALID_TO, versions_view
from jobs.point import ConsistencyPoint
from jobs.runtime.layout import RunLayout


def versioned_tables(plan: Plan) -> list[str]:
    """The sources the query joins FOR SYSTEM_TIME AS OF."""
    joins = [n for n in plan.root.walk() if isinstance(n, TemporalJoin)]
    return list(dict.fromkeys(s.table for j in joins for s in j.right.walk() if isinstance(s, ChangelogSource)))


def version_views(spark: SparkSession, plan: Plan, layout: RunLayout, point: ConsistencyPoint) -> dict[str, DataFrame]:
    """Each versioned table's history, by its view name."""
    views = {}
    for table in versioned_tables(plan):
        staged = staged_changelog(layout, table)
        changes = consumed_changes(spark, staged, point.rows_consumed(table))
        views[versions_view(table)] = history(changes, plan.spec.sources[table], staged.schema.names)
    return views


def empty_version_views(spark: SparkSession, plan: Plan, sources: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """The views with no rows (`sources`: the empty source tables)."""
    return {
        versions_view(t): sources[t].select("*", F.lit(None).cast("timestamp").alias(VALID_TO), F.lit(True).alias(LIVE))
        for t in versioned_tables(plan)
    }


def history(changes: DataFrame, source, columns: tuple[str, ...]) -> DataFrame:
    """The versions the changelog rows `changes` leave (`source`: the table's spec)."""
    key = [F.col(f"`{k}`") for k in source.primary_key]
    time = F.col(f"`{source.event_time}`")
    versions = changes.where(F.col(KIND) != int(RowKind.UPDATE_BEFORE))
    latest_first = Window.partitionBy(*key, time).orderBy(F.col(SEQ).desc())
    versions = versions.withColumn("__nth", F.row_number().over(latest_first)).where(F.col("__nth") == 1)
    in_time = Window.partitionBy(*key).orderBy(time)
    return versions.select(
        *[F.col(f"`{c}`") for c in columns],
        F.lead(time).over(in_time).alias(VALID_TO),
        (F.col(KIND) != int(RowKind.DELETE)).alias(LIVE),
    )
