"""Event-time windows on the stream side: assigning rows to windows, emitting final results, and
the late-events table.

Lateness is decided per (row, window): a row arriving in a micro-batch whose watermark (`__wm`,
stamped when the changelog was staged) is already at or past the window's end is late for that
window. The stream leaves such pairs out; the late-events table lists them, computed from the same
staged rows with the same expressions, so it holds exactly what the stream left out.

With `emit: final`, the touched windows' rows go to a pending table (Delta, under _state/) and a
window moves to the sink, as an insert, once the watermark after a micro-batch passes its end.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.columns import DELETE, FILE, KIND, LINE, OP, SEQ, UPSERT, WATERMARK, WINDOW_END, WINDOW_START
from jobs.changelog.frames import assign_windows, consumed_changes, on_time
from jobs.changelog.kinds import SHORT_NAMES
from jobs.plan.nodes import Calc, SessionAggregate, WindowAssign
from jobs.point import LateRead
from jobs.store.files import RunPath
from jobs.stream.writers import Changes, MergeCounts, TableWriter
from jobs.stream.writers.delta_rs import DeltaRsWriter


def stream_window_assign(df: DataFrame, node: WindowAssign) -> DataFrame:
    return assign_windows(df, node.window.spark_sql()).where(on_time())


W = TypeVar("W", bound=TableWriter)


class OpenWindows(Generic[W]):
    """What both engines' `emit: final` share: the emitter they wrap, and the open windows table
    with its three writers, each under its own application id (the touched windows, the windows
    a micro-batch closes, the windows the end of a bounded input closes)."""

    def __init__(self, inner, writer: Callable[[str], W], app_id: str):
        self.inner = inner
        self.pending = writer(f"{app_id}-pending")
        self.closer = writer(f"{app_id}-pending-closed")
        self.end_closer = writer(f"{app_id}-pending-end")
        # The window's end rides along hidden, unless the output has it: a window whose rows go
        # on to a later stage keeps __wstart and __wend as columns.
        self.hidden: tuple[str, ...] = (WINDOW_END,)

    @property
    def reads_twice(self) -> bool:
        return self.inner.reads_twice

    def create_pending(self, initial: pa.Table) -> None:
        self.hidden = () if WINDOW_END in initial.column_names else (WINDOW_END,)
        if not self.pending.exists():
            marks = pa.array([None] * initial.num_rows, pa.timestamp("us", tz="UTC"))
            table = initial.append_column(WINDOW_END, marks) if self.hidden else initial
            self.pending.create(table, "lockstep open windows")

    def shown(self, rows):
        """Rows of the open windows as the output has them (an Arrow table or a frame)."""
        if not self.hidden:
            return rows
        return rows.drop_columns(list(self.hidden)) if isinstance(rows, pa.Table) else rows.drop(*self.hidden)


class FinalWindowEmitter(OpenWindows[DeltaRsWriter]):
    """Wraps the aggregate's emitter: changes go to the pending table, closed windows
    go to the sink (once), then leave the pending table. The pending table is the stream's state,
    kept by delta-rs on the driver whichever writer writes the sink."""

    def __init__(self, inner, pending_path: Path, key: tuple[str, ...], app_id: str):
        super().__init__(inner, lambda app: DeltaRsWriter(pending_path, key, app), app_id)
        self._closing: pa.Table | None = None
        self._closing_all = False  # whether every open window closes with this micro-batch

    def changes(self, spark: SparkSession, updated: DataFrame, batch) -> Changes:
        touched = self.inner.changed_rows(spark, updated, batch, hidden=self.hidden)
        self.pending.apply(touched, batch.id)
        open_windows = self.pending.snapshot()
        self._closing = _closed(open_windows, batch.watermark_after)
        self._closing_all = self._closing.num_rows == open_windows.num_rows > 0
        rows = self.shown(self._closing)
        return Changes(rows=rows.append_column(OP, pa.array([UPSERT] * rows.num_rows, pa.string())))

    def after_sink_commit(self, batch) -> None:
        if self._closing_all:
            self.closer.clear(batch.id)
            return
        assert self._closing is not None, "the handler calls changes() before after_sink_commit()"
        closed = self.shown(self._closing)
        deletes = closed.append_column(OP, pa.array([DELETE] * closed.num_rows, pa.string()))
        self.closer.apply(deletes, batch.id)

    def latest_open_end(self) -> int | None:
        """The end (microseconds) of the latest window still open, if any."""
        table = self.pending.snapshot()
        return pc.max(table.column(WINDOW_END).cast(pa.int64())).as_py() if table.num_rows else None

    def close_all(self, sink: TableWriter, version: int) -> MergeCounts:
        """The end of a bounded input: every open window goes to the sink, as Flink's largest
        watermark at the end of a bounded source fires every window. `sink` commits under its own
        application id; `version` (the last micro-batch's id) makes a replay a no-op."""
        closing = self.pending.snapshot()
        rows = self.shown(closing)
        upserts = rows.append_column(OP, pa.array([UPSERT] * rows.num_rows, pa.string()))
        merged = sink.write(Changes(rows=upserts), version, "upsert")
        self.end_closer.clear(version)
        return merged


def _closed(open_windows: pa.Table, watermark: int | None) -> pa.Table:
    """The open windows whose end the watermark has reached."""
    if watermark is None or open_windows.num_rows == 0:
        return open_windows.slice(0, 0)
    ends = open_windows.column(WINDOW_END).cast(pa.int64())
    return open_windows.filter(pc.fill_null(pc.less_equal(ends, watermark), False))


def late_session_changes(rows: DataFrame, node: SessionAggregate, late_seqs: list[int]) -> DataFrame:
    """The changes the session operator left out (their sequence numbers, lateness.py), each
    with the window it would have formed: its own [ts, ts + gap), which touched no open session."""
    ts = F.col(f"`{node.window.time_col}`")
    late = rows.where(F.col(SEQ).isin(late_seqs)) if late_seqs else rows.limit(0)
    gap = F.expr(f"INTERVAL {node.window.size // timedelta(microseconds=1)} MICROSECONDS")
    return late.withColumn(WINDOW_START, ts).withColumn(WINDOW_END, ts + gap)


def write_late_events(
    spark: SparkSession, reads: list[LateRead], path: RunPath, late_seqs: list[int] | None = None
) -> int:
    """The (row, window) pairs the stream left out as late, of each windowed read (a window
    join's two sources), as one Delta table with the source each came from; returns the count.
    A session's late changes are the ones its operator recorded (`late_seqs`)."""
    tables = [late_pairs(spark, read, late_seqs) for read in reads]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    options = getattr(path, "storage_options", None)  # the run folder's place on a store, for a cluster
    write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite", storage_options=options)
    return table.num_rows


def late_pairs(spark: SparkSession, read: LateRead, late_seqs: list[int] | None) -> pa.Table:
    node, staged = read.window, read.staged
    rows = consumed_changes(spark, staged, read.consumed)
    if isinstance(node, SessionAggregate):
        late = late_session_changes(rows, node, late_seqs or [])
    else:
        if isinstance(node.input, Calc) and node.input.condition is not None:
            rows = rows.where(F.expr(node.input.condition.sql("spark")))
        late = assign_windows(rows, node.window.spark_sql()).where(~on_time())
    kinds = F.element_at(F.array(*[F.lit(k) for k in SHORT_NAMES]), F.col(KIND).cast("int") + 1)
    return (
        late.select(
            F.lit(read.table).alias("source"),
            *[F.col(f"`{c}`") for c in staged.schema.names],
            kinds.alias("op"),
            F.col(WINDOW_START).alias("window_start"),
            F.col(WINDOW_END).alias("window_end"),
            F.col(WATERMARK).alias("watermark"),
            F.col(FILE).alias("file"),
            F.col(LINE).alias("line"),
            F.col(SEQ).alias("seq"),
        )
        .orderBy("seq")
        .toArrow()
    )
