"""Flink's SinkUpsertMaterializer: upserts by a sink key from changes that are not keyed by it.

When the sink's primary key is not the query's upsert key (a join on s1.level = s2.id written
to a sink keyed by s1.id), an update of one sink key arrives as a retraction of one row and an
addition of a *different* row, in any order within a micro-batch: +I a1, -U a1, +U b1 or
+U b1, +I a1, -U a1 or +I a1, +U b1, -U a1. Netting them by sink key would delete the key in
the last two orders. So, as Flink does, each sink key keeps the rows it has alive in the order
they were added; a retraction removes the most recently added identical row, and the key's
value is the most recently added row still alive (none: the key is deleted). All three orders
end with b1.

The state is a dict on the driver, key -> list of live rows, saved after every micro-batch as
`state-<batch id>.parquet`. A micro-batch starts from the newest file older than itself, so one
that Spark replays after a crash sees the state it first saw and gives the same output.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.changelog.columns import DELETE, OP, ORDINAL, UPSERT, WEIGHT
from jobs.changelog.live_rowwise import python_values
from jobs.errors import RunStateError
from jobs.stream.state.live_state import numbered_files

# Each live row's place in the saved state: one sequence over all keys, so loading the rows
# in this order rebuilds every key's list as it was.
_STATE_FILE = re.compile(r"state-(\d+)\.parquet")
# One shared NaN object: Python compares tuples element by identity first, and hashes a NaN by
# its identity, so with a single NaN a row holding NaN can still be found and retracted.
_NAN = float("nan")


class UpsertMaterializer:
    def __init__(self, key: tuple[str, ...], columns: tuple[str, ...], state_dir: Path):
        self.key, self.columns, self.state_dir = key, columns, Path(state_dir)
        self._key_positions = [columns.index(k) for k in key]
        self._live: dict[tuple, list[tuple]] = {}
        self._schema: pa.Schema | None = None
        self._applied: int | None = None  # the micro-batch whose end state _live holds
        self._saved: pa.Table | None = None  # _live as last saved, to rewrite only touched keys

    def apply(self, changes: pa.Table, batch_id: int) -> pa.Table:
        """changes: the data columns plus `__w` (int8/int32/int64, +1 or -1), in arrival order.

        Returns one row per sink key touched, with __op = upsert (its newest live row) or
        delete (the key and the last row retracted from it)."""
        self._schema = pa.schema([changes.schema.field(c) for c in self.columns])
        with _collector_paused():
            if self._applied is None or batch_id != self._applied + 1:
                self._restore(batch_id)
            self._applied = None  # a change that fails half-way leaves _live to be reloaded
            keys, retracted = self._apply_changes(changes, batch_id)
            touched = dict.fromkeys(keys)  # in the order first touched
            self._save(batch_id, touched)
            self._applied = batch_id
            return self._output(touched, retracted)

    def state_rows(self) -> int:
        return sum(len(rows) for rows in self._live.values())

    def violations(self, limit: int = 5) -> list[dict]:
        """Sink keys with more than one distinct live row: the sink holds only the newest, so
        the query's result has rows the sink's primary key cannot tell apart."""
        found = []
        for rows in self._live.values():
            distinct = _distinct(rows)
            if len(distinct) > 1:
                shown = self._as_dicts(distinct)
                found.append({"key": {k: shown[0][k] for k in self.key}, "rows": shown})
                if len(found) == limit:
                    break
        return found

    def _apply_changes(self, changes: pa.Table, batch_id: int) -> tuple[list, dict[tuple, tuple]]:
        """Apply the changes in order; return every change's sink key and, for each key that
        lost a row, the last row retracted from it.

        The hot loop (one pass per change): plain tuples and dict operations, with the rare
        retraction of an older row (or of no row) left to _retract."""
        columns = [_python_values(changes.column(name)) for name in self.columns]
        keys = self._keys(columns)
        live, retracted = self._live, {}
        for weight, key, row in zip(changes.column(WEIGHT).to_pylist(), keys, zip(*columns)):
            rows = live.get(key)
            if weight == 1:
                if rows is None:
                    live[key] = [row]
                else:
                    rows.append(row)
            elif weight == -1:
                if rows and rows[-1] == row:
                    rows.pop()
                    if not rows:
                        del live[key]
                else:
                    self._retract(key, row, batch_id)
                retracted[key] = row
            else:
                raise ValueError(f"weight {weight} in micro-batch {batch_id}: expected +1 or -1")
        return keys, retracted

    def _keys(self, columns: list[list]) -> list[tuple]:
        return list(zip(*(columns[i] for i in self._key_positions)))

    def _retract(self, key: tuple, row: tuple, batch_id: int) -> None:
        rows = self._live.get(key, [])
        for index in range(len(rows) - 1, -1, -1):  # the most recently added copy goes first
            if rows[index] == row:
                del rows[index]
                if not rows:
                    del self._live[key]
                return
        raise self._not_live(row, batch_id)

    def _output(self, touched: dict[tuple, None], retracted: dict[tuple, tuple]) -> pa.Table:
        """One row per touched key: a key with no live row left has lost one in this
        micro-batch, so it has a last retracted row to show in its delete."""
        rows, ops = [], []
        for key in touched:
            live = self._live.get(key)
            rows.append(live[-1] if live else retracted[key])
            ops.append(UPSERT if live else DELETE)
        table = self._table(rows)
        return table.append_column(OP, pa.array(ops, pa.string()))

    def _table(self, rows: list[tuple]) -> pa.Table:
        """Rows of plain values back as a table of the data columns' Arrow types."""
        assert self._schema is not None, "apply() sets the schema before any row is held"
        columns: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in self.columns]
        return pa.table({field.name: _arrow_values(values, field.type) for field, values in zip(self._schema, columns)})

    def _save(self, batch_id: int, touched: dict[tuple, None]) -> None:
        """Save the live rows: the untouched keys' rows as last saved (filtered in Arrow, as
        turning a million Python rows back into columns would take longer than the whole
        micro-batch), then the touched keys' rows."""
        assert self._saved is not None, "apply() restores the state before its first micro-batch"
        fresh = self._table([row for key in touched for row in self._live.get(key, ())])
        kept = self._saved.filter(self._untouched(self._saved, touched)).cast(fresh.schema)
        state = pa.concat_tables([kept, fresh])
        ordinal = pa.array(np.arange(state.num_rows, dtype=np.int64))
        self._write(state.append_column(ORDINAL, ordinal), batch_id)
        self._saved = state

    def _untouched(self, saved: pa.Table, touched: dict[tuple, None]) -> pa.Array:
        """Which saved rows belong to a key this micro-batch did not touch. One key column is
        looked up in Arrow (is_in matches null to null, as the dict does); a composite key
        needs its tuples built in Python."""
        if len(self.key) == 1:
            field = saved.schema.field(self.key[0])
            values = _arrow_values([key[0] for key in touched], field.type)
            return pc.invert(pc.is_in(saved.column(field.name), value_set=values))
        saved_keys = zip(*(_python_values(saved.column(name)) for name in self.key))
        return pa.array([key not in touched for key in saved_keys], pa.bool_())

    def _write(self, table: pa.Table, batch_id: int) -> None:
        path = self._state_path(batch_id)
        tmp = path.with_suffix(".tmp")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        self._keep_two(batch_id)

    def _restore(self, batch_id: int) -> None:
        """Load the newest state older than batch_id: a file of batch_id or later is what a
        crashed attempt left, and this attempt replaces it."""
        saved = self._saved_batches()
        older = [b for b in saved if b < batch_id]
        self._live, self._saved = {}, self._table([])
        if older:
            self._load(self._state_path(older[-1]))
        elif saved and saved[-1] > batch_id:
            raise RunStateError(
                f"micro-batch {batch_id} is replayed, but the state it started "
                "from is gone (only the last two are kept)",
                where=str(self.state_dir),
            )

    def _load(self, path: Path) -> None:
        self._saved = pq.read_table(path).sort_by(ORDINAL).select(self.columns)
        columns = [_python_values(self._saved.column(name)) for name in self.columns]
        for key, row in zip(self._keys(columns), zip(*columns)):
            self._live.setdefault(key, []).append(row)

    def _keep_two(self, batch_id: int) -> None:
        """Keep this micro-batch's state and the one it started from (a replay of this batch
        needs it); later files are from an attempt that this one has overtaken."""
        saved = self._saved_batches()
        keep = {batch_id, *[b for b in saved if b < batch_id][-1:]}
        for old in saved:
            if old not in keep:
                self._state_path(old).unlink(missing_ok=True)

    def _saved_batches(self) -> list[int]:
        return numbered_files(self.state_dir, _STATE_FILE)

    def _state_path(self, batch_id: int) -> Path:
        return self.state_dir / f"state-{batch_id:012d}.parquet"

    def _as_dicts(self, rows: list[tuple]) -> list[dict]:
        """Rows as the user sees them (times as datetimes, not ticks)."""
        return self._table(rows).to_pylist()

    def _not_live(self, row: tuple, batch_id: int) -> RunStateError:
        """A retraction with no live copy to retract: the query's changelog is broken (or the
        state is not the one this query wrote), and going on would hide it."""
        shown = self._as_dicts([row])[0]
        key = ", ".join(f"{k}={shown[k]!r}" for k in self.key)
        values = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return RunStateError(
            f"sink key ({key}): retraction of ({values}), which is not a live row", where=f"micro-batch {batch_id}"
        )


@contextmanager
def _collector_paused():
    """Pause Python's cycle collector: each micro-batch makes hundreds of thousands of tuples,
    each allocation burst would make it walk the whole state again, and tuples of plain values
    cannot form a cycle."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _distinct(rows: list[tuple]) -> list[tuple]:
    """Distinct rows in the order first added; by ==, as a row may hold unhashable values."""
    distinct: list[tuple] = []
    for row in rows:
        if row not in distinct:
            distinct.append(row)
    return distinct


def _python_values(column: pa.ChunkedArray) -> list:
    """Column values to compare rows by, as the staging check compares them (times as integer
    ticks), and every NaN as the one _NAN, so a row holding NaN can be retracted."""
    values = python_values(column)
    if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
        return [_NAN if v is not None and v != v else v for v in values]
    return values


def _arrow_values(values, arrow_type: pa.DataType) -> pa.Array:
    """The inverse of _python_values."""
    if pa.types.is_timestamp(arrow_type):
        return pa.array(values, pa.int64()).cast(arrow_type)
    if pa.types.is_date32(arrow_type):
        return pa.array(values, pa.int32()).cast(arrow_type)
    return pa.array(values, arrow_type)
