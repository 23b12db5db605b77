"""An interval join's state that ends: a row leaves its side's state once no row still to come on
the other side can match it (plan/interval_join.py gives the bounds).

With left.ts BETWEEN right.ts + lower AND right.ts + upper, rows still to come are on time: after
their side's watermark. A left row can match no right row still to come once left.ts - lower is at
or before the right side's watermark; a right row, once right.ts + upper is at or before the left
side's. The watermark of a side is the one its rows in the micro-batch were staged under (each of
them on time against it); a side with no rows in the micro-batch forgets nothing on the other.

A forgotten row is left out of the rows before the micro-batch, so the join before and after it
differ only by what the micro-batch brings (the row's joined rows stay in the sink as they are),
and is retracted from the state's log; rows of keys that no micro-batch touches go when the state
is folded (live_state.py's compact_fold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.changelog.columns import COUNT, WATERMARK
from jobs.changelog.schema import epoch_micros
from jobs.plan.nodes import Join, StagedInput, TimeBounds
from jobs.stream.state.row_counts import live_rows


class IntervalExpiry:
    """The cut-offs of both sides for a micro-batch, and the rows they forget."""

    def __init__(self, node: Join, bounds: TimeBounds):
        self.bounds = bounds
        self.left_table, self.right_table = source_of(node.left), source_of(node.right)
        self.left_cut: int | None = None  # microseconds: a left row at or before it is forgotten
        self.right_cut: int | None = None

    def advance(self, segments: Mapping[str, Sequence[Path]] | None) -> None:
        """The cut-offs from the watermarks of this micro-batch's rows (they only grow)."""
        lower, upper = _micros(self.bounds.lower), _micros(self.bounds.upper)
        right_mark, left_mark = side_watermark(segments, self.right_table), side_watermark(segments, self.left_table)
        if right_mark is not None:
            self.left_cut = later(self.left_cut, right_mark + lower)
        if left_mark is not None:
            self.right_cut = later(self.right_cut, left_mark - upper)

    def split_left(self, rows: pa.Table) -> tuple[pa.Table, pa.Table]:
        return split_at(rows, self.bounds.left_time, self.left_cut)

    def split_right(self, rows: pa.Table) -> tuple[pa.Table, pa.Table]:
        return split_at(rows, self.bounds.right_time, self.right_cut)

    def fold_left(self, rows: pa.Table) -> pa.Table:
        return split_at(live_rows(rows), self.bounds.left_time, self.left_cut)[0]

    def fold_right(self, rows: pa.Table) -> pa.Table:
        return split_at(live_rows(rows), self.bounds.right_time, self.right_cut)[0]


def forgotten(rows: pa.Table) -> pa.Table:
    """Rows that leave the state: their counts negated, for the state's log."""
    return rows.set_column(rows.schema.get_field_index(COUNT), COUNT, pc.negate(rows.column(COUNT)))


def split_at(rows: pa.Table, time: str, cut: int | None) -> tuple[pa.Table, pa.Table]:
    """(rows kept, rows forgotten): forgotten when their time is at or before the cut-off."""
    if cut is None or rows.num_rows == 0:
        return rows, rows.slice(0, 0)
    gone = pc.fill_null(pc.less_equal(epoch_micros(rows.column(time)), cut), False)
    return rows.filter(pc.invert(gone)), rows.filter(gone)


def side_watermark(segments: Mapping[str, Sequence[Path]] | None, table: str | None) -> int | None:
    """The watermark the side's first segment of the micro-batch was staged under."""
    files = (segments or {}).get(table or "") or ()
    if not files:
        return None
    first = pq.read_table(files[0], columns=[WATERMARK]).column(WATERMARK)
    return epoch_micros(first.slice(0, 1))[0].as_py() if len(first) else None


def later(cut: int | None, candidate: int) -> int:
    return candidate if cut is None else max(cut, candidate)


def source_of(side) -> str | None:
    tables = [n.table for n in side.walk() if isinstance(n, StagedInput)]
    return tables[0] if len(tables) == 1 else None


def _micros(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)
