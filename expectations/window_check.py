"""What a check adds for a windowed query.

- emit: final: the stream holds only windows the watermark closed, so the batch result is
  compared on those windows only (the open ones are counted, not compared).
- Late events: the (row, window) pairs the stream left out. The report counts them by window and
  kind, and explains the difference: the batch result is recomputed without them (the user's SQL
  on the on-time pairs, see jobs/batch/without_late.py) and compared with the stream again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from expectations.columns import Columns
from expectations.report.model import WindowFigures
from expectations.sql import BATCH_VIEW, LATE_WINDOWS_VIEW, STREAM_COMPARED_VIEW, differing_rows
from expectations.suites import SuiteSpec
from expectations.suites.windows import ExpectWindowsWithoutLateEventsAgree, windows_suite
from jobs.batch.without_late import batch_without_late
from jobs.changelog.columns import COUNT
from jobs.changelog.staging import staged_changelog, watermark_at
from jobs.plan import Plan
from jobs.plan.nodes import SessionAggregate
from jobs.point import ConsistencyPoint, late_reads
from jobs.runtime.delta import is_delta_table, read_snapshot
from jobs.runtime.layout import RunLayout
from jobs.stream.operators.session.lateness import recorded_late

WITHOUT_LATE_VIEW = "lockstep_batch_without_late"


@dataclass
class WindowCheck:
    plan: Plan
    layout: RunLayout
    point: ConsistencyPoint
    late: DataFrame
    without_late: DataFrame | None = None  # the batch result without the late events, once computed

    @classmethod
    def of(cls, spark: SparkSession, plan: Plan, layout: RunLayout, point: ConsistencyPoint) -> WindowCheck:
        if is_delta_table(layout.late_events):
            late = read_snapshot(spark, layout.late_events)
        else:
            late = spark.createDataFrame([], "window_start TIMESTAMP, window_end TIMESTAMP, op STRING")
        late = late.cache()
        late.select("window_start", "window_end").distinct().createOrReplaceTempView(LATE_WINDOWS_VIEW)
        return cls(plan, layout, point, late)

    @property
    def final(self) -> bool:
        window = self.plan.window
        return window is not None and window.emit == "final"

    @property
    def watermark(self) -> int | None:
        """The watermark that closed the sink's windows: its window's source's, or the one an
        earlier stage's rows carried into it (changelog/feed_watermarks.py)."""
        read = self.plan.sink_window_input or self.plan.sources[0]
        if read.table in self.point.sources:
            return self.point.watermark(read.table)
        staged = staged_changelog(self.layout, read.table)
        return watermark_at(staged, staged.total_rows)

    def open_windows(self, spark: SparkSession, columns: list[str]) -> DataFrame | None:
        """emit: final: the windows still open at the point, as the stream holds them (its pending
        table): compared with the batch result like the sink's rows. None for emit: early."""
        version = self.point.open_windows_version
        if not self.final or version is None:
            return None
        return read_snapshot(spark, self.layout.pending, version).select(*[f"`{c}`" for c in columns])

    def final_windows(self) -> tuple[str | None, int | None] | None:
        """For the retraction suite: (window end as SQL, final watermark) of an emit: final query;
        the end is None where the output cannot say it (a session's, unless selected)."""
        writes_sink = self.plan.final_stage.window is not None  # else its rows went on to another operator
        return (self.plan.window_end_sql(), self.watermark) if self.final and writes_sink else None

    def suite(self, cols: Columns) -> SuiteSpec:
        if isinstance(self.plan.window, SessionAggregate):
            return _skipped("session windows: a late change has no fixed window to set its differences apart by")
        if any(late.stage is not self.plan.final_stage for late in self.plan.late_windows):
            return _skipped(
                "the late events are an earlier window's (its rows go on to another window or operator): "
                "the batch without the late events sets them apart"
            )
        try:
            return windows_suite(cols, self.plan.window_column())
        except ValueError:  # the query's rows are not one per window: a window's rows went on to another operator
            return _skipped(
                "the sink's rows are not keyed by a window (its rows go on to another operator): the "
                "batch without the late events sets them apart"
            )

    def figures(self, spark: SparkSession, cols: Columns, open_windows: int) -> WindowFigures:
        differing = spark.sql(differing_rows(cols, STREAM_COMPARED_VIEW, BATCH_VIEW)).count()
        late_events = self.late.count()
        explained = self._explain(spark, cols, differing, late_events) if late_events else None
        return WindowFigures(
            _iso(spark, self.watermark),
            self._end_of_input(),
            open_windows,
            late_events,
            _by_window(self.late),
            explained,
        )

    def release(self) -> None:
        """Let go of the cached frames: Spark would hand them to a later check whose plan reads
        the same paths (a run folder checked again after new input), with this check's rows."""
        self.late.unpersist()
        if self.without_late is not None:
            self.without_late.unpersist()

    def _end_of_input(self) -> str:
        if self.plan.window is None:
            return "window rows without an aggregate: each is written as it arrives"
        if not self.final:
            return "emit: early: every window is written as it changes"
        if all(source.bounded for source in self.plan.spec.sources.values()):
            return "bounded source: every window closed at the end of the input"
        return "bounded: false: windows the watermark has not passed stay open (compared as the stream holds them)"

    def still_differing(self, spark: SparkSession, cols: Columns) -> DataFrame:
        """The differing rows left when the batch result is recomputed without the late events."""
        if self.without_late is None:
            reads = late_reads(self.plan, self.layout, self.point)
            late_seqs = recorded_late(self.layout.late_changes)
            without_late = batch_without_late(spark, self.plan, reads, late_seqs)
            if self.plan.write_mode == "retract":
                without_late = as_multiset(without_late)
            self.without_late = without_late.cache()
        self.without_late.createOrReplaceTempView(WITHOUT_LATE_VIEW)
        return spark.sql(differing_rows(cols, STREAM_COMPARED_VIEW, WITHOUT_LATE_VIEW))

    def _explain(self, spark: SparkSession, cols: Columns, differing: int, late_events: int) -> dict:
        remaining = self.still_differing(spark, cols).count()
        explains = "all" if remaining == 0 else ("part" if remaining < differing else "none")
        sentence = {
            "all": f"{late_events} late events explain all of the difference: without them "
            f"the batch result equals the stream's",
            "part": f"{late_events} late events explain only part of the difference: without "
            f"them {remaining} of {differing} differing rows remain",
            "none": f"{late_events} late events do not explain the difference: without them "
            f"{remaining} rows still differ",
        }[explains]
        return {
            "explains": explains,
            "differing_rows": differing,
            "differing_rows_without_late_events": remaining,
            "summary": sentence,
        }


def _skipped(reason: str) -> SuiteSpec:
    """The windows suite without its expectation, and why."""
    return SuiteSpec("windows", "stream_result", (), ((ExpectWindowsWithoutLateEventsAgree.expectation_type, reason),))


def as_multiset(batch: DataFrame) -> DataFrame:
    """A batch result as a retract sink holds it: each distinct row once, with its copies."""
    columns = [F.col(f"`{c}`") for c in batch.columns]
    return batch.groupBy(*columns).agg(F.count(F.lit(1)).alias(COUNT))


def _by_window(late: DataFrame) -> list[dict]:
    counted = late.groupBy("window_start", "window_end", "op").count().orderBy("window_start", "op")
    return [
        {
            "window_start": str(r["window_start"]),
            "window_end": str(r["window_end"]),
            "kind": r["op"],
            "events": r["count"],
        }
        for r in counted.collect()
    ]


def _iso(spark: SparkSession, micros: int | None) -> str | None:
    if micros is None:
        return None
    row = spark.sql(f"SELECT timestamp_micros({micros}) AS t").first()
    assert row is not None, "a SELECT without FROM returns one row"
    return str(row["t"])
