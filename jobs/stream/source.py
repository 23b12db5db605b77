"""The stream's input: the spec's sources staged (validated, numbered, cut into segments), and a
staged changelog read as a Spark stream, one segment per micro-batch."""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.columns import KIND, SEQ, WATERMARK, WEIGHT
from jobs.changelog.frames import weight
from jobs.changelog.staging import StagedChangelog, StageResult, stage_source
from jobs.plan import Plan
from jobs.plan.nodes import StagedInput
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress


def stage_sources(
    plan: Plan, layout: RunLayout, progress: Progress, until: date | None = None, spark: SparkSession | None = None
) -> list[StageResult]:
    """Validate every source's new files (a Delta source's new versions, read with `spark`)
    first, then commit them all: a bad row in one source leaves the whole run folder untouched."""
    pending = [
        stage_source(
            t,
            plan.spec.sources[t],
            layout.staged(t),
            layout.quarantine,
            batch_size=plan.spec.stream,
            anomalies=layout.anomalies,
            until=until,
            spark=spark,
        )
        for t in plan.source_tables
    ]
    for staged, commit in pending:
        commit()
        note = f", {len(staged.quarantined)} quarantined" if staged.quarantined else ""
        if staged.anomalies:
            note += f", {len(staged.anomalies)} kept although they break the changelog protocol"
        if staged.absent_fields:
            note += f", {staged.absent_fields} with a field left out (read as NULL)"
        pieces = "version(s)" if plan.spec.sources[staged.source].format == "delta" else "file(s)"
        progress.say(
            f"source {staged.source}: {len(staged.new_files)} new {pieces}, "
            f"{staged.new_rows:,} new rows{note}, {staged.total_rows:,} in all"
        )
    return [staged for staged, _ in pending]


def staged_input(layout: RunLayout, node: StagedInput) -> StagedChangelog:
    return StagedChangelog(layout.staged(node.table))


def changelog_stream(spark: SparkSession, staged: StagedChangelog) -> DataFrame:
    """The staged changelog as a stream, one segment (micro-batch) per trigger, each row with its
    weight: +1 for +I and +U, -1 for -U and -D."""
    segments = (
        spark.readStream.schema(staged.segment_ddl()).option("maxFilesPerTrigger", 1).parquet(str(staged.segment_dir))
    )
    watermark = [WATERMARK] if staged.event_time else []
    return segments.select(*staged.schema.names, weight().alias(WEIGHT), SEQ, KIND, *watermark)
