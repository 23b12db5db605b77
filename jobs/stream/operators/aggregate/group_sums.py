"""A group aggregate's state kept by lockstep (`stream.state_store: lockstep`, the default).

Per group, the state is the sums streaming.py defines (__count, __n<j>, __s<j>; per value slot
for MIN / MAX / DISTINCT aggregates), kept as a keyed state of a compacted snapshot and short
logs (state/live_state.py) instead of in Spark's streaming aggregation. Per micro-batch:

    partial = the micro-batch's sums per group         on the driver from its staged files
                                                        (driver_sums.py), else one stateless
                                                        Spark job over its rows
    before  = the touched groups' sums, from the state  read by Arrow, the touched keys only
    after   = before + partial, per group               every touched group, a zero count too

`after` is exactly what Spark's update output held; the emitter finalises it (on the driver
where it can, driver_groups.py), and a zero count becomes a delete. The partial is logged.
When the logs are folded, a group whose count is zero
leaves the state: a group with no live rows costs nothing afterwards (Spark's aggregation kept
every group it ever saw).

With `stream.state_ttl`, a group not changed for that long is forgotten, as Flink's
`table.exec.state.ttl` forgets idle state: it is not read again and the fold drops it. Time is
Spark's timestamp of the micro-batch (recorded in its offset log), so a replayed micro-batch
forgets what its first attempt forgot. A group whose changes in a micro-batch only retract rows
of a forgotten state is left alone, as Flink ignores a retraction without state, and counted.

A window's state is sorted by window first: its snapshot's parts (state/snapshot_parts.py) are ranges of
windows in time, and a fold rewrites the parts of the open windows only; the closed windows' parts
are kept as they are, so their cost does not grow with the history (they stay in the state).

Exactly-once is state/live_state.py's: micro-batch b reads the state before b, and a replayed b logs
the same partial again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.changelog.columns import COUNT, TOUCHED, WINDOW_END, WINDOW_START
from jobs.errors import InputError
from jobs.stream.operators.aggregate.driver_sums import sums_on_driver
from jobs.stream.operators.aggregate.streaming import AggregateState, nonnull_column, streaming_aggregate, sum_column
from jobs.stream.operators.driver_input import DriverInput
from jobs.stream.operators.window.driver_windows import WindowedInput
from jobs.stream.state.live_state import PART_ROWS, LiveState
from jobs.stream.state.row_counts import SumOverflow, keys_among, summed_per_group


@dataclass(frozen=True)
class Forgetting:
    """State TTL: which groups a micro-batch no longer sees (none without a TTL)."""

    ttl: timedelta | None
    now_ms: int = 0  # the micro-batch's time

    def forgotten(self, groups: pa.Table) -> np.ndarray:
        """Per group (summed), whether it is idle for longer than the TTL."""
        if self.ttl is None or groups.num_rows == 0:
            return np.zeros(groups.num_rows, bool)
        since = self.now_ms - self.ttl // timedelta(milliseconds=1)
        return pc.fill_null(pc.less(groups.column(TOUCHED), since), False).to_numpy(zero_copy_only=False)


class GroupSums:
    """The state of one group aggregate, and what a micro-batch makes of it."""

    def __init__(
        self,
        state: AggregateState,
        directory: Path,
        ttl: timedelta | None = None,
        direct: DriverInput | WindowedInput | None = None,
        part_rows: int = PART_ROWS,
    ):
        self.state, self.ttl = state, ttl
        # Where the micro-batch's rows can be read and summed on the driver (driver_sums.py).
        self.direct = direct
        self._schema: pa.Schema | None = None  # of Spark's partial sums, found on first use
        self.keys = state.state_key
        self._forgetting = Forgetting(ttl)
        # Without a TTL a snapshot's fold is the reader's (so parts no log touches are kept as they are).
        self.store = LiveState(
            directory,
            windows_first(self.keys),
            fold=self._groups,
            compact_fold=self._kept_groups if ttl is not None else None,
            part_rows=part_rows,
        )
        self.ignored_groups = 0  # groups whose changes only retracted forgotten state (TTL)

    def after(
        self, rows: DataFrame, batch_id: int, now_ms: int = 0, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table:
        """The touched groups' sums after the micro-batch `rows` (what Spark's update output
        held, streaming.py); `now_ms` is the micro-batch's time (state TTL), `segments` its
        staged files."""
        self._forgetting = Forgetting(self.ttl, now_ms)
        partial = self._partial(rows, now_ms, segments)
        touched = partial.select(list(self.keys)) if self.keys else None
        before = self.store.rows_before(batch_id, touched, partial.schema)
        forgotten = self._forgetting.forgotten(before)
        kept = before.filter(pa.array(~forgotten))
        after = self._sum(pa.concat_tables([kept, partial]))
        after, partial = self._without_orphans(after, partial, kept)
        # A forgotten group touched again starts from nothing: its old sums are retracted in the
        # log, so that no later fold adds them back.
        cleared = _negated(before.filter(pa.array(forgotten & keys_among(before, partial, self.keys))), self.keys)
        self.store.record(pa.concat_tables([partial, cleared]), batch_id)
        return after.drop_columns([TOUCHED])

    def _partial(self, rows: DataFrame, now_ms: int, segments: Mapping[str, Sequence[Path]] | None) -> pa.Table:
        """The micro-batch's sums per group: on the driver from its files where they can be read
        there, else by one Spark job over its rows."""
        read = self.direct.rows(segments) if self.direct is not None and segments else None
        if read is None or self._schema is None:
            # Spark's plan is built only when it runs, or once for its types (each plan is round
            # trips to the JVM, which a micro-batch on the driver does not otherwise make).
            spark_sums = streaming_aggregate(rows, self.state).withColumn(TOUCHED, F.lit(now_ms).cast("bigint"))
            if read is None:
                return spark_sums.toArrow()
            self._schema = to_arrow_schema(spark_sums.schema, timezone="UTC")
        try:
            return sums_on_driver(read, self.state, self._schema, now_ms)
        except SumOverflow as overflow:
            raise self._overflow_error(overflow) from None

    def _groups(self, rows: pa.Table) -> pa.Table:
        """State rows read back: per group its sums, the groups of count zero left out."""
        summed = self._sum(rows)
        if summed.num_rows == 0:
            return summed
        return summed.filter(pc.not_equal(pc.fill_null(summed.column(COUNT), 0), 0))

    def _kept_groups(self, rows: pa.Table) -> pa.Table:
        """State rows folded into a snapshot: the groups read back, less the forgotten ones."""
        groups = self._groups(rows)
        return groups.filter(pa.array(~self._forgetting.forgotten(groups)))

    def _sum(self, rows: pa.Table) -> pa.Table:
        try:
            return summed_per_group(rows, self.keys)
        except SumOverflow as overflow:
            raise self._overflow_error(overflow) from None

    def _overflow_error(self, overflow: SumOverflow) -> InputError:
        return InputError(
            f"a sum ({_described(overflow.column, self.state)}) no longer fits {overflow.type}, "
            f"where Spark's ANSI arithmetic fails too",
            where=f"the query's aggregate {self.state.node.output_names}",
        )

    def _without_orphans(self, after: pa.Table, partial: pa.Table, kept: pa.Table) -> tuple[pa.Table, pa.Table]:
        """With a TTL: the groups whose changes only retract forgotten rows (no state before,
        no live row after) left out of the output and the log, and counted, as Flink ignores a
        retraction that finds no state. Without one such a group cannot occur."""
        if self.ttl is None or after.num_rows == 0:
            return after, partial
        counts = pc.fill_null(after.column(COUNT), 0).to_numpy()
        orphans = (counts <= 0) & ~keys_among(after, kept, self.keys)
        if not orphans.any():
            return after, partial
        self.ignored_groups += int(orphans.sum())
        gone = keys_among(partial, after.filter(pa.array(orphans)), self.keys)
        return after.filter(pa.array(~orphans)), partial.filter(pa.array(~gone))


def groups_now(directory: Path, keys: tuple[str, ...], next_batch: int) -> pa.Table:
    """Every group in the state as micro-batch `next_batch` would read it, summed, the groups of
    count zero since the last fold included (the check's state suite looks for them in the sink)
    and TOUCHED left out."""
    files = sorted(directory.glob("batch-*.parquet")) or sorted(directory.glob("snapshot-*/part-*.parquet"))
    if not files:
        return pa.table({})
    like = pq.read_schema(files[-1])
    rows = LiveState(directory, keys, fold=lambda r: summed_per_group(r, keys)).rows_before(next_batch, None, like)
    return rows.drop_columns([TOUCHED]) if TOUCHED in rows.column_names else rows


def windows_first(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The state's keys in the order its snapshot is sorted by: a window's start and end first.
    Rows arrive for the open windows only (the watermark closes the rest), so the parts of closed
    windows are ranges no log touches, kept from fold to fold without being read."""
    return tuple(sorted(keys, key=lambda k: k not in (WINDOW_START, WINDOW_END)))


def _negated(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The rows with their count and sums negated (their keys and time kept): what takes them
    back when added."""
    kept = {*keys, TOUCHED}
    return pa.table(
        [rows.column(c) if c in kept else pc.negate(rows.column(c)) for c in rows.column_names], schema=rows.schema
    )


def _described(column: str, state: AggregateState) -> str:
    """A state column as the user wrote it: the aggregate call it keeps a sum for."""
    for j, call in enumerate(state.node.aggregates):
        if column in (sum_column(j), nonnull_column(j)):
            return f"{call.func}({call.arg}) AS {call.name}"
    return "the group's row count" if column == COUNT else column
