"""`lockstep batch`: the user's SQL over the input the stream had consumed, written as a Delta table.

Each source's snapshot is the multiset of rows whose weights sum to a positive count, computed by
Spark from the staged changelog up to the consistency point: for a keyed source that is the last
image of every live key, for a keyless one every live copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date

from jobs.batch.from_topic import topic_snapshot
from jobs.changelog.delta_source import consumed_version, table_as_of
from jobs.changelog.frames import source_snapshot
from jobs.changelog.staging import staged_changelog
from jobs.lookup.tables import lookup_tables
from jobs.plan import Plan
from jobs.point import FINGERPRINT_KEY, ConsistencyPoint, read_point
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.runtime.small_work import sized_for
from jobs.runtime.spark import spark_session
from jobs.runtime.tables import tables_for
from jobs.spark_sql import run_sql, version_views
from jobs.spec.model import Settings


@dataclass
class BatchResult:
    rows: int
    input_rows: int
    seconds: float


def run_batch(
    plan: Plan,
    settings: Settings,
    layout: RunLayout,
    progress: Progress | None = None,
    logical_date: date | None = None,
) -> BatchResult:
    """The batch result at the latest consistency point, or at a logical date's."""
    progress = progress or Progress(quiet=True)
    started = time.monotonic()
    point = read_point(layout, logical_date)
    spark = spark_session(settings.spark, progress)
    input_rows = point.total_rows()
    with sized_for(spark, input_rows, settings.spark.small_work_rows):
        rows = _write_results(spark, plan, layout, point, progress, settings.kafka.timeout_seconds)
    seconds = time.monotonic() - started
    progress.say(f"batch {plan.spec.name}: {rows:,} result rows from {input_rows:,} changelog rows in {seconds:.1f} s")
    return BatchResult(rows, input_rows, seconds)


def _write_results(
    spark, plan: Plan, layout: RunLayout, point: ConsistencyPoint, progress: Progress, kafka_timeout: float
) -> int:
    """The query's result over the sources as of the point, and each intermediate stage's, written
    as Delta tables; the query's row count."""
    snapshots = {
        s.table: _source_table(spark, plan, s.table, layout, point, progress, kafka_timeout) for s in plan.sources
    }
    lookups = lookup_tables(spark, plan, snapshots)  # the services, asked now
    for name, table in lookups.items():  # kept for the check: did the stream get other answers?
        table.write.mode("overwrite").parquet(str(layout.lookup_answers(name, "batch")))
    snapshots.update(lookups)
    snapshots.update(version_views(spark, plan, layout, point))  # a temporal join's versioned tables
    metadata = {FINGERPRINT_KEY: point.fingerprint()}
    write = tables_for(plan.spec.sink.writer).overwrite
    rows = write(run_sql(spark, plan, snapshots), layout.batch, metadata)
    for stage in plan.intermediate_stages:
        # Each intermediate stage's batch equivalent, for the check to find the first stage
        # where stream and batch part (the stage SQL reads the same source views).
        write(run_sql(spark, stage, snapshots), layout.for_stage(stage.name).batch, metadata)
    return rows


def _source_table(
    spark, plan: Plan, name: str, layout: RunLayout, point: ConsistencyPoint, progress: Progress, timeout: float
):
    """A source as of what the stream consumed: a Delta table by time travel to the version the
    stream had reached, a Kafka topic read up to the offsets it had reached (both independent of
    the staged changelog); a folder source, and a Delta or Kafka source whose rows were set aside
    or consumed to the middle of a piece, from the staged changelog."""
    staged = staged_changelog(layout, name)
    spec = plan.spec.sources[name]
    consumed = point.rows_consumed(name)
    if spec.kafka is not None:
        frame, read = topic_snapshot(spark, name, spec, staged, point.sources.get(name), timeout)
        if frame is not None:
            progress.say(f"source {name}: read from {read}")
            return frame
        progress.say(f"source {name}: read from the staged changelog, not the topic ({read})")
    elif spec.format == "delta":
        version = consumed_version(staged.manifest, consumed)
        if version is not None and not staged.manifest["quarantined"]:
            return table_as_of(spark, spec, staged.schema, version)
        progress.say(
            f"source {name}: read from the staged changelog, not by time travel "
            f"({'rows were set aside' if staged.manifest['quarantined'] else 'the stream stopped inside a version'})"
        )
    return source_snapshot(spark, staged, consumed)
