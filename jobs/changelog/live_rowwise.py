"""The changelog protocol, one row at a time: the definition the columnar check (live.py) must
agree with, and the path that names each offending row when some row breaks the protocol.

With a primary key, a source is a table keyed by it: +I needs the key absent, -U and -D need the
key present with exactly the retracted image, +U needs the key absent (after its -U, or new).
Without one, a source is a multiset: -U and -D need at least one live copy of the identical row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from jobs.changelog.columns import COUNT, KIND
from jobs.changelog.kinds import RowKind
from jobs.changelog.schema import SourceSchema


class RowByRow:
    """The live rows as a dict on the driver: one entry per live key (or distinct row with its
    count), with plain Python values."""

    def __init__(self, schema: SourceSchema, primary_key: tuple[str, ...]):
        self.schema = schema
        self.primary_key = primary_key
        self._key_positions = [schema.names.index(k) for k in primary_key]
        self._live: dict[tuple, Any] = {}  # per key its live row; per row of a multiset its count

    def __len__(self) -> int:
        return len(self._live)

    @classmethod
    def of_table(cls, schema: SourceSchema, primary_key: tuple[str, ...], table: pa.Table) -> RowByRow:
        """The state held by `table` (live.py's layout: the live rows, plus COUNT for a multiset)."""
        state = cls(schema, primary_key)
        rows = zip(*(python_values(table.column(name)) for name in schema.names))
        if primary_key:
            state._live = {tuple(row[i] for i in state._key_positions): row for row in rows}
        else:
            state._live = dict(zip(rows, table.column(COUNT).to_pylist()))
        return state

    def table(self) -> pa.Table:
        """The inverse of of_table."""
        rows = list(self._live.values()) if self.primary_key else list(self._live)
        columns: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in self.schema.names]
        table = pa.table({c.name: pa.array(values, c.arrow_type) for c, values in zip(self.schema.columns, columns)})
        if not self.primary_key:
            table = table.append_column(COUNT, pa.array(list(self._live.values()), pa.int64()))
        return table

    def apply(self, kind: RowKind, row: tuple) -> str | None:
        """Apply one change; return why it is invalid (and leave the state alone) or None."""
        if self.primary_key:
            return self._apply_keyed(kind, row)
        return self._apply_multiset(kind, row)

    def _apply_keyed(self, kind: RowKind, row: tuple) -> str | None:
        key = tuple(row[i] for i in self._key_positions)
        if any(part is None for part in key):
            return f"primary key {self._describe(key)} has a null column"
        live = self._live.get(key)
        if kind is RowKind.INSERT and live is not None:
            return f"+I for key {self._describe(key)}, which is already present"
        if kind is RowKind.UPDATE_AFTER and live is not None:
            return f"+U for key {self._describe(key)} without a preceding -U"
        if kind.is_retraction:
            if live is None:
                return f"{kind.short} for key {self._describe(key)}, which was never inserted or is already gone"
            if live != row:
                return f"{kind.short} for key {self._describe(key)} does not match its live row {live}"
            del self._live[key]
            return None
        self._live[key] = row
        return None

    def _apply_multiset(self, kind: RowKind, row: tuple) -> str | None:
        count = self._live.get(row, 0)
        if kind.is_retraction:
            if not count:
                return f"{kind.short} for row {row}, which has no live copy to retract"
            if count == 1:
                del self._live[row]
            else:
                self._live[row] = count - 1
            return None
        self._live[row] = count + 1
        return None

    def _describe(self, key: tuple) -> str:
        return "(" + ", ".join(f"{k}={v!r}" for k, v in zip(self.primary_key, key)) + ")"

    def check(self, rows: pa.Table, keep: bool = False) -> list[tuple[int, str]]:
        """Apply the rows in order; return (row index, reason) for each one that is invalid.
        With `keep`, an invalid row still changes the state as a table would take it (see
        force()), because it stays in the changelog."""
        columns = [python_values(rows.column(name)) for name in self.schema.names]
        kinds = rows.column(KIND).to_pylist()
        apply_fast = self._fast_keyed if self.primary_key else self._fast_multiset
        invalid = []
        for index, (kind, row) in enumerate(zip(kinds, zip(*columns))):
            if apply_fast(kind, row):
                continue
            reason = self.apply(RowKind(kind), row)
            if reason:
                invalid.append((index, reason))
                if keep:
                    self.force(RowKind(kind), row)
        return invalid

    # The common, valid cases of apply() with plain ints and dict operations (a file with a bad
    # row comes here whole, millions of rows maybe); False sends the row to apply().

    def _fast_keyed(self, kind: int, row: tuple) -> bool:
        positions = self._key_positions
        key = (row[positions[0]],) if len(positions) == 1 else tuple(row[i] for i in positions)
        live = self._live
        if kind == 0 or kind == 2:  # +I, +U: the key must be absent
            if key in live or None in key:
                return False
            live[key] = row
            return True
        if live.get(key) != row:  # -U, -D: must retract exactly the live row
            return False
        del live[key]
        return True

    def _fast_multiset(self, kind: int, row: tuple) -> bool:
        live = self._live
        count = live.get(row, 0)
        if kind == 0 or kind == 2:
            live[row] = count + 1
            return True
        if count == 0:
            return False
        if count == 1:
            del live[row]
        else:
            live[row] = count - 1
        return True

    def force(self, kind: RowKind, row: tuple) -> None:
        """Apply an invalid change the way a table keyed by the primary key would: an addition
        replaces the key's row, a retraction removes whatever the key holds."""
        if not self.primary_key:
            if not kind.is_retraction:
                self._live[row] = self._live.get(row, 0) + 1
            return
        key = tuple(row[i] for i in self._key_positions)
        if None in key:
            return
        if kind.is_retraction:
            self._live.pop(key, None)
        else:
            self._live[key] = row


def python_values(column: pa.ChunkedArray) -> list:
    """Column values for the dict: times as their integer ticks, which compare the same and
    convert many times faster than timezone-aware datetimes."""
    if pa.types.is_timestamp(column.type):
        return column.cast(pa.int64()).to_pylist()
    if pa.types.is_date32(column.type):
        return column.cast(pa.int32()).to_pylist()
    return column.to_pylist()
