"""The rows a source has alive, used to check that every retraction retracts something.

A retraction that retracts nothing would make the weighted changelog count a row below zero, so it
is a bad row, reported with its file and line like a malformed one (the protocol itself is defined
row by row in live_rowwise.py).

The state is an Arrow table of the live rows (plus COUNT, the copies of each distinct row, for a
source without a primary key), saved beside the staged changelog so that a later `lockstep stream`
continues checking where this one ended. A file of changes is checked in columns
(live_columnar.py): about a second for millions of rows, where a loop over rows took tens. Only
when some row breaks the protocol is the file replayed row by row, to name each offending row.

Past PART_ROWS live rows (with a spill folder) the state is split by key into parts on disk
(live_parts.py) and checked a part at a time: memory holds the changes and one part, not every
live key.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from jobs.changelog.columns import COUNT, KIND
from jobs.changelog.live_columnar import keyed_after, multiset_after
from jobs.changelog.live_parts import LiveParts, key_hashes
from jobs.changelog.live_rowwise import RowByRow
from jobs.changelog.schema import SourceSchema

# Live rows held in memory at once, at most, once the state is split (about 100 MiB of the race's
# orders): the columnar check takes a few times a part's size while it runs.
PART_ROWS = 1_000_000


class LiveRows:
    def __init__(
        self,
        schema: SourceSchema,
        primary_key: tuple[str, ...],
        spill: Path | None = None,
        part_rows: int | None = None,
    ):
        """`spill`: a folder of this run's own where a state past `part_rows` rows is split
        into parts (default PART_ROWS); without one the state stays in memory whole."""
        self.schema = schema
        self.primary_key = primary_key
        self._table = RowByRow(schema, primary_key).table()
        self._parts: LiveParts | None = None
        self._spill, self._part_rows = spill, part_rows or PART_ROWS

    @property
    def _key(self) -> list[str]:
        return list(self.primary_key or self.schema.names)

    def __len__(self) -> int:
        return sum(self._parts.counts) if self._parts else self._table.num_rows

    def check(self, rows: pa.Table, keep: bool = False) -> list[tuple[int, str]]:
        """Apply the changes in `rows`, in order; return (row index, reason) for each one that
        breaks the protocol. With `keep`, an invalid row still changes the state as a table keyed
        by the primary key would take it, because it stays in the changelog."""
        if rows.num_rows == 0:
            return []
        self._split_for(len(self) + rows.num_rows)
        if self._parts is None:
            self._table, invalid = self._checked(self._table, rows, keep)
            return invalid
        where = key_hashes(rows, self._key) % np.uint64(len(self._parts))
        invalid = []
        for i in range(len(self._parts)):
            index = np.flatnonzero(where == i)
            if len(index):
                part, found = self._checked(self._parts.read(i, self._table.schema), rows.take(index), keep)
                self._parts.write(i, part)
                invalid += [(int(index[j]), reason) for j, reason in found]
        return sorted(invalid)

    def _split_for(self, rows: int) -> None:
        """Enough parts that each holds about `part_rows` of `rows` live rows."""
        if self._spill is None or rows <= self._part_rows * (len(self._parts) if self._parts else 1):
            return
        if self._parts is None:
            parts = 2
            while rows > self._part_rows * parts:
                parts *= 2
            self._parts = LiveParts.split(self._table, self._key, parts, self._spill)
            self._table = self._table.slice(0, 0)  # the schema stays; the rows are in the parts
            return
        while rows > self._part_rows * len(self._parts):
            self._parts.double(self._key, self._table.schema)

    def _checked(self, state: pa.Table, rows: pa.Table, keep: bool) -> tuple[pa.Table, list[tuple[int, str]]]:
        after = self._columnar_after(state, rows)
        if after is not None:
            return after, []
        one_by_one = RowByRow.of_table(self.schema, self.primary_key, state)
        invalid = one_by_one.check(rows, keep=keep)
        return one_by_one.table(), invalid

    def _columnar_after(self, state: pa.Table, rows: pa.Table) -> pa.Table | None:
        changes = rows.select(self.schema.names)
        current = state.select(self.schema.names).cast(changes.schema)
        kinds = rows.column(KIND).to_numpy()
        if self.primary_key:
            return keyed_after(current, changes, kinds, self.primary_key)
        return multiset_after(current, state.column(COUNT).to_numpy(), changes, kinds)

    def save(self, stem: Path) -> Path:
        """Write the state as `stem`.parquet, or once split as the folder `stem` of parts; the
        path written."""
        if self._parts is None:
            path = stem.with_name(stem.name + ".parquet")
            pq.write_table(self._table, path)
            return path
        self._parts.save(stem)
        return stem

    def load(self, path: Path) -> None:
        """The state a save wrote (a file, or a folder of parts)."""
        if path.is_dir() and self._spill is not None:
            self._parts = LiveParts.of(path, self._spill)
        elif path.is_dir():  # nowhere to write parts: the whole state in memory
            files = sorted(path.glob("part-*.parquet"))
            self._table = pa.concat_tables([pq.read_table(f).cast(self._table.schema) for f in files])
        else:
            self._table = pq.read_table(path).cast(self._table.schema)

    def table(self) -> pa.Table:
        """Every live row (read from the parts once split)."""
        if self._parts is None:
            return self._table
        return pa.concat_tables([self._parts.read(i, self._table.schema) for i in range(len(self._parts))])

    def clear_spill(self) -> None:
        """Parts a run that did not commit left behind."""
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)
