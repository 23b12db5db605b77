"""The stream's input: the spec's sources staged (validated, numbered, cut into segments), and a
staged changelog read as a Spark stream, one segment per micro-batch."""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.columns import KIND, SEQ, WATERMARK, WEIGHT
from jobs.changelog.frames import weight
from jobs.changelog.staging import StagedChangelog, StageResult, staged_changelog
from jobs.plan import Plan
from jobs.plan.nodes import StagedInput
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.stream.staging_tasks import StagingJob, commit_as_tasks, stage_as_tasks


def stage_sources(
    plan: Plan,
    layout: RunLayout,
    progress: Progress,
    until: date | None = None,
    spark: SparkSession | None = None,
    as_tasks: bool = False,
    kafka_timeout: float = 10,
) -> list[StageResult]:
    """Validate every source's new files (a Delta source's new versions, read with `spark`)
    first, then commit them all: a bad row in one source leaves the whole run folder untouched.
    With `as_tasks` (the spark engine) the folder sources are staged and committed by Spark tasks
    on the executors (staging_tasks.py), so their rows never pass through this process."""
    jobs = [
        StagingJob(
            t,
            plan.spec.sources[t],
            layout.staged(t),
            layout.quarantine,
            layout.anomalies,
            plan.spec.stream,
            until,
            kafka_timeout,
        )
        for t in plan.source_tables
    ]
    remote = [job for job in jobs if as_tasks and job.source.format != "delta" and job.source.kafka is None]
    here = [job for job in jobs if job not in remote]
    if remote:
        progress.say(f"staging {len(remote)} source(s) as Spark tasks on the executors")
    staged = {job.table: job.stage(spark) for job in here}
    staged.update(zip((job.table for job in remote), stage_as_tasks(spark, remote)))
    for job in here:
        job.commit()
    commit_as_tasks(spark, remote)
    results = [staged[t] for t in plan.source_tables]
    for result in results:
        source = plan.spec.sources[result.source]
        progress.say(_staged_line(result, "kafka" if source.kafka is not None else source.format))
    return results


def _staged_line(staged: StageResult, source_format: str) -> str:
    note = f", {staged.quarantined_rows} quarantined" if staged.quarantined_rows else ""
    if staged.anomaly_rows:
        note += f", {staged.anomaly_rows} kept although they break the changelog protocol"
    if staged.absent_fields:
        note += f", {staged.absent_fields} with a field left out (read as NULL)"
    if staged.tombstones:
        note += f", {staged.tombstones} tombstone(s) skipped"
    pieces = {"delta": "version(s)", "kafka": "offset range(s)"}.get(source_format, "file(s)")
    return (
        f"source {staged.source}: {len(staged.new_files)} new {pieces}, "
        f"{staged.new_rows:,} new rows{note}, {staged.total_rows:,} in all"
    )


def staged_input(layout: RunLayout, node: StagedInput) -> StagedChangelog:
    return staged_changelog(layout, node.table)


def changelog_stream(spark: SparkSession, staged: StagedChangelog) -> DataFrame:
    """The staged changelog as a stream, one segment (micro-batch) per trigger, each row with its
    weight: +1 for +I and +U, -1 for -U and -D."""
    segments = (
        spark.readStream.schema(staged.segment_ddl())
        .option("maxFilesPerTrigger", 1)
        .parquet(str(staged.spark_segment_dir))
    )
    watermark = [WATERMARK] if staged.event_time else []
    return segments.select(*staged.schema.names, weight().alias(WEIGHT), SEQ, KIND, *watermark)
