"""The value multisets: for MIN, MAX and DISTINCT aggregates, every live value per group.

Spark's streaming aggregation counts each (group, slot, value); its update output gives the new
count of every value touched in a micro-batch. The live values themselves are kept in a keyed
state of their own (state/live_state.py: a snapshot sorted by group, short logs of net changes, zero
counts dropped when they are folded), so that a micro-batch reads the values of the groups it
touches and nothing else. Per micro-batch: the touched groups' values before it, overlaid with
Spark's new counts, are the values after it, from which the groups' MIN / MAX / DISTINCT results
are recomputed (on the driver where Arrow computes exactly what Spark would, else in Spark); the
difference (new count less old) is logged as the micro-batch's net change.

Exactly-once: micro-batch b reads the state before b, as state/live_state.py keeps it; a replayed b
gets the same counts from Spark (its state is the one before b) and logs the same change again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.columns import COUNT, SLOT
from jobs.changelog.schema import all_nullable
from jobs.errors import RunStateError
from jobs.stream.operators.aggregate.streaming import AggregateState, recompute, value_column
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import compares_as_spark, row_codes, spark_normalized


class ValueMultisets:
    def __init__(self, directory: Path, state: AggregateState):
        refuse_old_layout(directory)
        self.directory, self.state = directory, state
        self._live: LiveState | None = None

    def results(self, spark: SparkSession, updated: pa.Table, batch_id: int) -> pa.Table | DataFrame:
        """The MIN / MAX / DISTINCT results of the groups a micro-batch touched, after it: an
        Arrow table where the driver computes them exactly (driver_results), else Spark's
        frame. `updated` is the touched groups' sums: the slot key columns and __count, slot 0
        for every touched group. Records the micro-batch's change: call it once per micro-batch."""
        live, after = self._values_after(spark, updated, batch_id)
        if exact_on_driver(self.state, after.schema):
            return driver_results(after, self.state)
        return recompute(live.frame(spark, after), self.state)

    def _values_after(self, spark: SparkSession, updated: pa.Table, batch_id: int) -> tuple[LiveState, pa.Table]:
        slots = updated.column(SLOT).to_numpy()
        counts = all_nullable(updated.filter(pa.array(slots > 0)))
        touched = updated.filter(pa.array(slots == 0)).select(list(self.state.keys))
        live = self._state(counts.schema)
        before = live.rows_before(batch_id, touched, counts.schema)
        after, change = overlay(before, counts)
        live.record(change, batch_id)
        return live, after

    def _state(self, schema: pa.Schema) -> LiveState:
        """The keyed state, made on first use: its column types are those of Spark's output."""
        if self._live is None:
            self._live = LiveState(self.directory, self.state.keys)
        return self._live


# What Arrow's grouped aggregation computes exactly as Spark does, by aggregate.
_ON_DRIVER = {"MIN": "min", "MAX": "max", "COUNT": "count"}


def exact_on_driver(state: AggregateState, schema: pa.Schema) -> bool:
    """Whether driver_results equals recompute() on these values: a grouped aggregate with MIN,
    MAX and COUNT only (SUM and AVG keep Spark's result types and rounding), MIN and MAX over
    values Arrow orders as Spark does (row_counts.compares_as_spark)."""
    keys_flat = not any(pa.types.is_nested(schema.field(k).type) for k in state.keys)
    return (
        bool(state.keys)
        and keys_flat
        and all(
            call.func in _ON_DRIVER and (call.func == "COUNT" or compares_as_spark(schema.field(value_column(j)).type))
            for j, call in state.multiset_calls
        )
    )


def driver_results(after: pa.Table, state: AggregateState) -> pa.Table:
    """recompute() on the driver, over the live values of the touched groups: a few rows go back
    to Spark instead of every live value (1.2 M for a COUNT(DISTINCT) of 20 groups)."""
    keys = list(state.keys)
    wanted = [(value_column(j), _ON_DRIVER[call.func]) for j, call in state.multiset_calls]
    grouped = after.group_by(keys, use_threads=False).aggregate(wanted)
    columns = [grouped.column(k) for k in keys] + [grouped.column(f"{v}_{fn}") for v, fn in wanted]
    return pa.table(columns, names=keys + [call.name for _, call in state.multiset_calls])


def overlay(before: pa.Table, counts: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(the live values after, the net change): `before` holds live values with their counts,
    `counts` the new count of each value it names (zero or less: no longer live). Both have the
    same columns; a value is its row without __count, compared as Spark groups (row_codes)."""
    if counts.num_rows == 0:
        return before, counts
    names = [c for c in counts.column_names if c != COUNT]
    both = spark_normalized(pa.concat_tables([before.select(names), counts.select(names)]))
    codes = row_codes(both)
    old, new = codes[: before.num_rows], codes[before.num_rows :]
    position = np.full(int(codes.max()) + 1, -1, np.int64)
    position[old] = np.arange(before.num_rows)
    matched = position[new]
    old_counts = before.column(COUNT).to_numpy()
    new_counts = counts.column(COUNT).to_numpy()
    previous = np.zeros(len(new), np.int64)
    found = matched >= 0
    previous[found] = old_counts[matched[found]]
    untouched = before.filter(pa.array(~np.isin(old, new)))
    after = pa.concat_tables([untouched, counts.filter(pa.array(new_counts > 0))])
    difference = new_counts - previous
    change = counts.filter(pa.array(difference != 0)).set_column(
        counts.schema.get_field_index(COUNT),
        counts.schema.field(COUNT),
        pa.array(difference[difference != 0], pa.int64()),
    )
    return after, change


def refuse_old_layout(directory: Path) -> None:
    """A run folder whose value multisets are a Delta table (lockstep before the keyed state)
    cannot go on: its values are not where this version reads them."""
    if (directory / "_delta_log").is_dir():
        raise RunStateError(
            "this run folder keeps its MIN / MAX / DISTINCT values in the format of an "
            "earlier lockstep; `lockstep rebuild` replays it into the current one, or "
            "start a new --out folder",
            where=str(directory),
        )
