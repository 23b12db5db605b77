"""The rows a source has alive, used to check that every retraction retracts something.

A retraction that retracts nothing would make the weighted changelog count a row below zero, so it
is a bad row, reported with its file and line like a malformed one (the protocol itself is defined
row by row in live_rowwise.py).

The state is an Arrow table of the live rows (plus COUNT, the copies of each distinct row, for a
source without a primary key), saved beside the staged changelog so that a later `lockstep stream`
continues checking where this one ended. A file of changes is checked in columns
(live_columnar.py): about a second for millions of rows, where a loop over rows took tens. Only
when some row breaks the protocol is the file replayed row by row, to name each offending row.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.changelog.columns import COUNT, KIND
from jobs.changelog.live_columnar import keyed_after, multiset_after
from jobs.changelog.live_rowwise import RowByRow
from jobs.changelog.schema import SourceSchema


class LiveRows:
    def __init__(self, schema: SourceSchema, primary_key: tuple[str, ...]):
        self.schema = schema
        self.primary_key = primary_key
        self._table = RowByRow(schema, primary_key).table()

    def __len__(self) -> int:
        return self._table.num_rows

    def check(self, rows: pa.Table, keep: bool = False) -> list[tuple[int, str]]:
        """Apply the changes in `rows`, in order; return (row index, reason) for each one that
        breaks the protocol. With `keep`, an invalid row still changes the state as a table keyed
        by the primary key would take it, because it stays in the changelog."""
        if rows.num_rows == 0:
            return []
        after = self._columnar_after(rows)
        if after is not None:
            self._table = after
            return []
        one_by_one = RowByRow.of_table(self.schema, self.primary_key, self._table)
        invalid = one_by_one.check(rows, keep=keep)
        self._table = one_by_one.table()
        return invalid

    def _columnar_after(self, rows: pa.Table) -> pa.Table | None:
        changes = rows.select(self.schema.names)
        state = self._table.select(self.schema.names).cast(changes.schema)
        kinds = rows.column(KIND).to_numpy()
        if self.primary_key:
            return keyed_after(state, changes, kinds, self.primary_key)
        return multiset_after(state, self._table.column(COUNT).to_numpy(), changes, kinds)

    def save(self, path: Path) -> None:
        pq.write_table(self._table, path)

    def load(self, path: Path) -> None:
        self._table = pq.read_table(path).cast(self._table.schema)
