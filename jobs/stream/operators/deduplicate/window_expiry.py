"""A Top-N per window's state that ends: once the watermark has reached a window's end, no row
still to come falls into that window (a later one is late, left out by the window assignment),
so its partition leaves the state, as Flink's window Top-N frees a window when it fires.

The partition is never touched again, so the rows before each micro-batch never hold it; it goes
when the state is folded (live_state.py's compact_fold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from jobs.changelog.columns import WINDOW_END
from jobs.plan.event_time import bound_of
from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.join.expiry import later, side_watermark, source_of, split_at
from jobs.stream.state.row_counts import live_rows


class WindowExpiry:
    """The partitions of windows the watermark has closed, left out when the state is folded."""

    def __init__(self, node: Deduplicate, window_end: str):
        self.window_end, self.table = window_end, source_of(node.input)
        self.cut: int | None = None  # microseconds: a window ending at or before it is closed

    @classmethod
    def of(cls, node: Deduplicate) -> WindowExpiry | None:
        """For a Top-N partitioned by a window's end (with its start: plan/planner.py)."""
        end = next((k for k in node.keys if bound_of(node.input, k) == WINDOW_END), None)
        return cls(node, end) if end is not None else None

    def advance(self, segments: Mapping[str, Sequence[Path]] | None) -> None:
        mark = side_watermark(segments, self.table)
        if mark is not None:
            self.cut = later(self.cut, mark)

    def fold(self, rows: pa.Table) -> pa.Table:
        return split_at(live_rows(rows), self.window_end, self.cut)[0]
