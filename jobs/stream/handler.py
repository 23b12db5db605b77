"""The foreachBatch handler: per micro-batch, ask the emitter for the changes, write them to the
stage's table exactly once, and log what the micro-batch read and wrote."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.feed_watermarks import record_watermark
from jobs.changelog.staging import watermark_at
from jobs.errors import RunStateError, from_worker
from jobs.plan import StagePlan
from jobs.plan.event_time import join_delay
from jobs.plan.nodes import Join
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress, counts
from jobs.stream.emitters import Emitter, MicroBatch
from jobs.stream.offsets import (
    batch_segments,
    batch_timestamp_ms,
    consumed_rows,
    largest_unread_segment,
    logged_files,
    read_up_to,
)
from jobs.stream.operators.aggregate.group_sums import GroupSums
from jobs.stream.source import staged_input
from jobs.stream.writers import TableWriter

# Fault injection for the exactly-once tests: exit the process right after the sink commit of
# this micro-batch, before Spark records the batch as done (the moment a crash hurts most).
FAULT_AFTER_COMMIT = "LOCKSTEP_FAULT_AFTER_SINK_COMMIT"
SPARK_DURATIONS = "spark_durations.json"  # in the stage's state folder: Spark's timing per micro-batch


@dataclass
class StreamCounts:
    """What the micro-batches of the stage that writes the sink did, summed."""

    batches: int = 0
    input_rows: int = 0
    changelog: Counter = field(default_factory=Counter)
    # Groups whose changes only retracted state the TTL had forgotten, left alone (state TTL).
    ignored_groups: int = 0


class MicroBatchHandler:
    """The foreachBatch function of one stage's streaming query."""

    def __init__(
        self,
        stage: StagePlan,
        sink: TableWriter,
        emitter: Emitter,
        layout: RunLayout,
        progress: Progress,
        spark: SparkSession,
        totals: StreamCounts,
        sums: GroupSums | None = None,
        after_micro_batch: Callable[[], None] | None = None,
        held_rows: Callable[[], int] | None = None,
        feeds_window: bool = False,
    ):
        self.stage, self.sink, self.emitter, self.layout, self.sums = stage, sink, emitter, layout, sums
        self.after_micro_batch = after_micro_batch
        # lockstep's own state (the local engine's keyed operators): its rows after each micro-batch.
        self.held_rows = held_rows
        # A later stage's window reads this stage's rows by an event time: each committed version
        # is recorded with its watermark, an interval join's held back by its bounds.
        self.feeds_window = feeds_window
        self.interval_join = next((n for n in stage.root.walk() if isinstance(n, Join) and n.time_bounds), None)
        self.held: dict[int, int] = {}
        self.progress, self.spark, self.totals = progress, spark, totals
        self.error: Exception | None = None
        self.staged = [staged_input(layout, node) for node in stage.inputs]
        self.total = sum(staged.total_rows for staged in self.staged)

    @property
    def largest_micro_batch(self) -> int:
        """At most how many rows a micro-batch of this run reads: each input's largest segment
        not yet consumed."""
        return sum(
            largest_unread_segment(self.layout.checkpoint, index, staged) for index, staged in enumerate(self.staged)
        )

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            self._process(frame, batch_id)
        except Exception as exc:
            # Kept so the caller can raise it as it was: Spark would wrap it in a Java trace.
            self.error = from_worker(exc) or exc
            raise

    def _process(self, frame: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = self._micro_batch(batch_id)
        # A micro-batch read twice (value multisets, then results) is cached so the stateful
        # plan runs once; read once, caching would only cost.
        if self.emitter.reads_twice:
            frame.persist()
        try:
            changes = self.emitter.changes(self.spark, frame, batch)
            merged = self.sink.write(changes, batch_id, self.stage.write_mode)
            if merged.skipped_replay:
                # Spark's stateful operators commit their state stores only when the frame is
                # computed, and Spark fails a micro-batch whose stores did not all commit. The
                # noop sink computes it and keeps nothing.
                frame.write.format("noop").mode("overwrite").save()
            self.emitter.after_sink_commit(batch)
            carried = self._carried_watermark(batch) if self.feeds_window else None
            if carried is not None:
                record_watermark(self.layout.state, self.sink.version(), carried)
        finally:
            if self.emitter.reads_twice:
                frame.unpersist()
        if os.environ.get(FAULT_AFTER_COMMIT) == str(batch_id) and not merged.skipped_replay:
            os._exit(70)
        if self.held_rows is not None:
            self.held[batch_id] = self.held_rows()
        self._record(batch, merged, time.monotonic() - started)
        if self.after_micro_batch is not None:
            self.after_micro_batch()

    def _carried_watermark(self, batch: MicroBatch) -> int | None:
        """The watermark a later stage's window sees after this micro-batch's rows: the source's,
        or an interval join's, the lower of its sides' held back by its bounds (as Flink's)."""
        join = self.interval_join
        if join is None:
            return batch.watermark_after
        if batch.least_watermark is None:
            return None
        return batch.least_watermark - join_delay(join) // timedelta(microseconds=1)

    def _record(self, batch: MicroBatch, merged, seconds: float) -> None:
        ignored = self.sums.ignored_groups - self.totals.ignored_groups if self.sums else 0
        self.totals.ignored_groups += ignored
        self.totals.batches += 1
        self.totals.input_rows += batch.rows
        self.totals.changelog.update(merged.changelog())
        entry = {
            "batch": batch.id,
            "start_seq": batch.start,
            "end_seq": batch.end,
            "rows": batch.rows,
            "changelog": merged.changelog(),
            "seconds": round(seconds, 3),
            "merge_seconds": round(merged.seconds, 3),
            "replayed": merged.skipped_replay,
            "finished_at": round(time.time(), 3),
            **({"ignored_groups": ignored} if ignored else {}),
        }
        with open(self.layout.batches_log, "a") as out:
            out.write(json.dumps(entry) + "\n")
        replay = " (replayed: already committed, skipped)" if merged.skipped_replay else ""
        if ignored:
            replay += f"; {ignored:,} group(s) only retracting forgotten state ignored (state TTL)"
        share = f" ({100 * batch.consumed / self.total:.0f}%)" if self.total else ""
        rate = f", {batch.rows / seconds:,.0f} rows/s" if seconds > 0 else ""
        self.progress.say(
            f"  batch {batch.id}: {batch.rows:,} rows, {batch.consumed:,} of {self.total:,}{share}, "
            f"sink {counts(merged.changelog())}, {seconds:.2f} s{rate}{replay}"
        )
        self.progress.advance(batch.consumed, self.total, "micro-batches")

    def _micro_batch(self, batch_id: int) -> MicroBatch:
        """The changelog rows this micro-batch covers (summed over inputs), the watermark after
        it; and a check that each input's segment follows the one the previous batch read."""
        start = end = rows = consumed = 0
        watermark = None
        files = {}
        marks_after: list[int | None] = []
        for index, (node, staged) in enumerate(zip(self.stage.inputs, self.staged)):
            taken = logged_files(self.layout.checkpoint, index)
            after = read_up_to(self.layout.checkpoint, index, batch_id - 1)
            up_to = read_up_to(self.layout.checkpoint, index, batch_id)
            consumed += consumed_rows(taken, up_to, staged)
            if self.feeds_window and self.interval_join is not None:  # each side's, for the join's
                marks_after.append(watermark_at(staged, consumed_rows(taken, up_to, staged)))
            segments = batch_segments(taken, after, up_to, staged)
            files[node.table] = tuple(staged.directory / s["file"] for s in segments)
            if not segments:
                continue
            lo = segments[0]["first_seq"]
            hi = segments[-1]["first_seq"] + segments[-1]["rows"]
            if batch_id > 0:
                previous = consumed_rows(taken, after, staged)
                if lo != previous:
                    raise RunStateError(
                        f"micro-batch {batch_id} read rows from {lo} but the changelog continues at {previous}",
                        where=str(staged.directory),
                    )
            start, end, rows = start + lo, end + hi, rows + hi - lo
            marks = [s["watermark_after"] for s in segments if s.get("watermark_after") is not None]
            watermark = max(marks + ([watermark] if watermark is not None else []), default=None)
        least = min(marks_after) if marks_after and None not in marks_after else None  # type: ignore[type-var]
        return MicroBatch(
            batch_id,
            start,
            end,
            watermark,
            rows,
            consumed,
            files,
            batch_timestamp_ms(self.layout.checkpoint, batch_id),
            least,
        )

    def record_progress(self, progress_entries) -> None:
        """From Spark's progress of the query's micro-batches (its last hundred): the state rows
        after each (with the live rows of lockstep's own state), for the report's chart; and
        Spark's own timing of each micro-batch that read rows (durationMs: finding the segment,
        the offset and commit logs, planning, addBatch around the handler), for
        `bench_microbatch` and whoever asks where a micro-batch's time went. Read here rather
        than by a listener: a Python listener costs each micro-batch 20-60 ms of callbacks
        (measured with bench_microbatch)."""
        sizes, durations = {}, {}
        for entry in progress_entries:
            operators = entry.stateOperators or []
            if operators:
                sizes[entry.batchId] = sum(op.numRowsTotal for op in operators)
            if "addBatch" in entry.durationMs:
                durations[entry.batchId] = dict(entry.durationMs)
        for batch_id, rows in self.held.items():  # beside Spark's (a local operator after its aggregation)
            sizes[batch_id] = sizes.get(batch_id, 0) + rows
        for name, values in (("state_rows.json", sizes), (SPARK_DURATIONS, durations)):
            if values:
                with open(self.layout.state / name, "w") as out:
                    json.dump(values, out)
