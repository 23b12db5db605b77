"""A windowed aggregate's input read on the driver: each row once per window it falls in.

Where a tumbling or hopping window aggregate reads a staged changelog's columns (operators/driver_input.py),
its micro-batch's rows are assigned to their windows on the driver, in microseconds, as Spark's
`window(ts, size[, slide])` assigns them: the latest window start at or before ts is
ts - (ts mod slide) (the remainder taken non-negative, so times before 1970 fall as Spark's do),
the earlier ones a slide apart, ceil(size / slide) candidates of which those with
start <= ts < start + size are kept; a row without a time falls in none. A (row, window) pair is
on time when the watermark stamped on the row's micro-batch at staging (`__wm`) is NULL or before
the window's end (frames.on_time). Rows the watermark closed are left out, as the Spark path
leaves them out; the late-events table lists them, from Spark, as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructType

from jobs.changelog.columns import COUNT, WATERMARK, WINDOW_END, WINDOW_START
from jobs.plan.nodes import WindowAssign, WindowSpec
from jobs.stream.operators.driver_input import DriverInput, driver_input


@dataclass(frozen=True)
class WindowedInput:
    """Reads a window assignment's rows of a micro-batch: its input's rows (with the watermark
    carried) spread over their windows, the late pairs left out."""

    below: DriverInput
    window: WindowSpec

    def rows(self, segments: Mapping[str, Sequence[Path]]) -> pa.Table | None:
        read = self.below.rows(segments)
        return None if read is None else on_time_windows(read, self.window)


def windowed_input(node: WindowAssign, schema: StructType) -> WindowedInput | None:
    """How to read a window assignment's rows on the driver, if its input is a staged changelog's
    columns and its windows are tumbling or hopping; `schema` is its streaming frame's."""
    if node.window.session:
        return None
    below = driver_input(node.input, schema, carried=(WATERMARK,))
    return None if below is None else WindowedInput(below, node.window)


def on_time_windows(rows: pa.Table, window: WindowSpec) -> pa.Table:
    """`rows` (the input's columns, COUNT, then WATERMARK) once per window their time falls in,
    with WINDOW_START and WINDOW_END after the input's columns, COUNT last, late pairs left out."""
    times = rows.column(window.time_col)
    index, starts = assigned_windows(times, window.size, window.slide)
    size = window.size // timedelta(microseconds=1)
    watermark = pc.fill_null(rows.column(WATERMARK).cast(pa.int64()), np.iinfo(np.int64).min).to_numpy()
    on_time = starts + size > watermark[index]
    index, starts = index[on_time], starts[on_time]
    kind = times.type
    spread = rows.drop_columns([COUNT, WATERMARK]).take(pa.array(index))
    return pa.table(
        [
            *spread.columns,
            pa.array(starts, pa.int64()).cast(kind),
            pa.array(starts + size, pa.int64()).cast(kind),
            rows.column(COUNT).take(pa.array(index)),
        ],
        names=[*spread.column_names, WINDOW_START, WINDOW_END, COUNT],
    )


def assigned_windows(times: pa.ChunkedArray, size: timedelta, slide: timedelta) -> tuple[np.ndarray, np.ndarray]:
    """Per (row, window) pair, the row's index and the window's start in microseconds: Spark's
    window() in integer arithmetic."""
    size_us, slide_us = size // timedelta(microseconds=1), slide // timedelta(microseconds=1)
    valid = times.is_valid().to_numpy(zero_copy_only=False)
    ts = pc.fill_null(times.cast(pa.int64()), 0).to_numpy()
    last = ts - np.mod(ts, slide_us)  # numpy's remainder takes the divisor's sign: never negative here
    indexes, starts = [], []
    for i in range(math.ceil(size_us / slide_us)):
        start = last - i * slide_us
        inside = valid & (start <= ts) & (ts < start + size_us)
        indexes.append(np.flatnonzero(inside))
        starts.append(start[inside])
    return np.concatenate(indexes), np.concatenate(starts)
