"""`lockstep stream`: stage the sources' new files, run the plan's stages one after the other
(each a Spark Structured Streaming query over its input's new segments, see stage.py), and record
the consistency point the batch job will compute on.

Incremental: the Spark checkpoints and the staged changelogs live in the run folder, so a second
`lockstep stream` processes only files added since the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from jobs.changelog.delta_source import check_table
from jobs.changelog.kafka_source import check_topic
from jobs.changelog.staging import StageResult
from jobs.errors import RunStateError
from jobs.plan import Plan
from jobs.point import ConsistencyPoint, late_reads, latest_logical_date, write_point
from jobs.runtime.layout import RunLayout
from jobs.runtime.memory import memory_returned
from jobs.runtime.progress import Progress, counts
from jobs.runtime.spark import spark_session, start_in_background
from jobs.spec.model import Settings
from jobs.stream.handler import StreamCounts
from jobs.stream.operators.session.lateness import recorded_late
from jobs.stream.operators.window.windows import write_late_events
from jobs.stream.point import consistency_point
from jobs.stream.relocate import follow_moved_run_folder
from jobs.stream.source import stage_sources
from jobs.stream.stage import run_stage


@dataclass
class StreamResult:
    staged: list[StageResult]
    point: ConsistencyPoint
    counts: StreamCounts = field(default_factory=StreamCounts)  # of the stage that writes the sink
    seconds: float = 0.0
    late_events: int = 0

    @property
    def batches(self) -> int:
        return self.counts.batches

    @property
    def input_rows(self) -> int:
        return self.counts.input_rows

    @property
    def changelog(self):
        return self.counts.changelog

    @property
    def sink_version(self) -> int:
        return self.point.sink_version


def run_stream(
    plan: Plan,
    settings: Settings,
    layout: RunLayout,
    progress: Progress | None = None,
    logical_date: date | None = None,
    after_micro_batch: Callable[[], None] | None = None,
) -> StreamResult:
    """Stream the sources' new changelog files (with a logical date: the partitions up to it) into
    the sink, and record the consistency point (per logical date too, for later re-checks).
    `after_micro_batch` is called once each micro-batch is in the sink and the run folder (a run
    folder on an object store commits then)."""
    progress = progress or Progress(quiet=True)
    for warning in plan.warnings:
        progress.say(f"warning: {warning}")
    moved = follow_moved_run_folder(layout)
    if moved:
        progress.say(f"the run folder moved to {layout.root}: {moved} checkpoint log(s) now name it")
    # Spark starts in the background while the folder sources are staged (a bad row still fails
    # at once; the 6 M-row race's staging and start took 17 s and 6 s one after the other), but
    # before a Delta source, which is read through it, and under the spark engine, whose
    # executors stage the folder sources.
    delta_sources = {name: s for name, s in plan.spec.sources.items() if s.format == "delta"}
    for name, source in delta_sources.items():
        check_table(name, source)
    kafka_sources = {name: s for name, s in plan.spec.sources.items() if s.kafka is not None}
    for name, source in kafka_sources.items():
        check_topic(name, source, settings.kafka.timeout_seconds)
    # The spark engine's executors stage the folder sources; with the run folder on an object
    # store they cannot see the working copy, and the driver stages into it.
    as_tasks = plan.spec.stream.engine == "spark" and layout.spark_root is None
    read_by_spark = delta_sources or kafka_sources or as_tasks
    early = spark_session(settings.spark) if read_by_spark else None  # quiet: one line if it fails
    start_in_background(settings.spark, plan.spec)
    with memory_returned():
        staged = stage_sources(
            plan,
            layout,
            progress,
            until=logical_date,
            spark=early,
            as_tasks=as_tasks,
            kafka_timeout=settings.kafka.timeout_seconds,
        )
    spark = spark_session(settings.spark, progress)
    sink_counts = StreamCounts()
    started = time.monotonic()
    try:
        for stage in plan.stages:
            if len(plan.stages) > 1:
                progress.say(f"stage {stage.number}/{len(plan.stages)}: {stage.name}")
            totals = sink_counts if stage.is_final else StreamCounts()
            run_stage(spark, plan, stage, layout, progress, totals, settings.spark.small_work_rows, after_micro_batch)
            progress.done()
    finally:
        progress.done()  # a failed micro-batch's one line must not be drawn over by the bar
    seconds = time.monotonic() - started
    point = write_point(layout, consistency_point(plan, layout, logical_date))
    result = StreamResult(staged, point, sink_counts, seconds, _late_events(spark, plan, layout, point))
    late = f"; {result.late_events:,} late (row, window) pairs left out" if result.late_events else ""
    if result.counts.ignored_groups:
        late += (
            f"; {result.counts.ignored_groups:,} group(s) whose changes only retracted state "
            f"forgotten by stream.state_ttl ignored"
        )
    progress.say(
        f"stream {plan.spec.name}: {result.batches} micro-batches, "
        f"{result.input_rows:,} changelog rows in {result.seconds:.1f} s; "
        f"sink changes {counts(result.changelog)}{late}; consistency point: sink version "
        f"{result.point.sink_version}"
    )
    return result


def stream_until(
    plan: Plan,
    settings: Settings,
    layout: RunLayout,
    progress: Progress,
    logical_date: date,
    after_micro_batch: Callable[[], None] | None = None,
) -> StreamResult | None:
    """The stream step of a scheduled run: stream up to the logical date, unless the stream has
    already moved beyond it (a re-run of a past date): then nothing is streamed, and the date is
    re-checked at its recorded consistency point by time travel (None)."""
    latest = latest_logical_date(layout)
    if latest is not None and latest > logical_date:
        if not layout.point_for(logical_date.isoformat()).exists():
            raise RunStateError(
                f"{logical_date} was never streamed and the stream is already at "
                f"{latest}: `lockstep rebuild` replays every partition in date order",
                where=str(layout.root),
            )
        progress.say(
            f"stream {plan.spec.name}: already at {latest}, past {logical_date}; "
            f"{logical_date} is re-checked at its consistency point by time travel"
        )
        return None
    return run_stream(plan, settings, layout, progress, logical_date, after_micro_batch)


def _late_events(spark, plan: Plan, layout: RunLayout, point: ConsistencyPoint) -> int:
    """Windowed queries: write the (row, window) pairs the stream left out as late."""
    reads = late_reads(plan, layout, point)
    if not reads:
        return 0
    return write_late_events(spark, reads, layout.late_events, recorded_late(layout.late_changes))
