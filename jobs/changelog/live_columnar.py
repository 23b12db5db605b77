"""The changelog protocol checked a whole file of changes at a time, in columns.

Each function takes the live state and the changes (same columns, changes in changelog order)
and returns the state after them, or None when some change breaks the protocol: then live.py
replays the file row by row (live_rowwise.py) to name each offending row. Keys are compared
exactly (dictionary codes over the state and the changes together, never hashes), so the answer
is the row-by-row one whenever this one is not None.

The idea: sort the changes by key, stably. A change's predecessor is the change before it with the
same key, or, for the first change of a key, the key's live row in the state. Each change is then
checked against its predecessor alone: an addition (+I, +U) needs the key absent, a retraction
(-U, -D) needs it present with exactly the retracted image (for a multiset: a live copy left).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT
from jobs.changelog.kinds import RowKind

ADDITIONS = np.array([RowKind.INSERT, RowKind.UPDATE_AFTER], np.int8)


def keyed_after(state: pa.Table, changes: pa.Table, kinds: np.ndarray, key: tuple[str, ...]) -> pa.Table | None:
    """The live rows (one per key) after `changes`, or None when a change breaks the protocol."""
    codes = key_codes(pa.concat_tables([state.select(key), changes.select(key)]), nulls_match=False)
    live_codes, change_codes = codes[: state.num_rows], codes[state.num_rows :]
    if (change_codes < 0).any():  # a null in the primary key
        return None
    adding = np.isin(kinds, ADDITIONS)
    runs = _KeyRuns(change_codes)
    state_row = np.full(int(codes.max()) + 1, -1)
    state_row[live_codes] = np.arange(state.num_rows)
    before = runs.previous()
    # The image a change sees: its key's previous change in the file, else the key's live row.
    present = np.where(before >= 0, adding[before], state_row[change_codes] >= 0)
    if (adding & present).any() or (~adding & ~present).any():
        return None
    retracting = np.flatnonzero(~adding)
    seen = np.where(before >= 0, state.num_rows + before, state_row[change_codes])[retracting]
    if not rows_equal(changes.take(retracting), pa.concat_tables([state, changes]).take(seen)):
        return None
    untouched = np.ones(len(state_row), bool)
    untouched[change_codes] = False
    return pa.concat_tables(
        [state.take(np.flatnonzero(untouched[live_codes])), changes.take(np.flatnonzero(runs.is_last() & adding))]
    )


def multiset_after(state: pa.Table, counts: np.ndarray, changes: pa.Table, kinds: np.ndarray) -> pa.Table | None:
    """The distinct live rows with their COUNT after `changes`, or None when a retraction finds
    no live copy of its row."""
    both = pa.concat_tables([state, changes])
    codes = key_codes(both, nulls_match=True)
    change_codes = codes[state.num_rows :]
    copies = np.zeros(int(codes.max()) + 1, np.int64)
    copies[codes[: state.num_rows]] = counts
    steps = np.where(np.isin(kinds, ADDITIONS), 1, -1)
    if (copies[change_codes] + _KeyRuns(change_codes).sum_before(steps) + steps < 0).any():
        return None
    np.add.at(copies, change_codes, steps)
    # Each distinct row's first occurrence (the state's copy if it has one). Not a fancy-index
    # assignment with repeated indices: numpy does not promise which of the writes wins.
    first_row = np.full(len(copies), len(codes))
    np.minimum.at(first_row, codes, np.arange(len(codes)))
    alive = np.flatnonzero(copies > 0)
    return both.take(first_row[alive]).append_column(COUNT, pa.array(copies[alive], pa.int64()))


class _KeyRuns:
    """The changes grouped by key code, each group in changelog order."""

    def __init__(self, codes: np.ndarray):
        self.order = np.argsort(codes, kind="stable")
        ordered = codes[self.order]
        self.starts = np.ones(len(codes), bool)
        self.starts[1:] = ordered[1:] != ordered[:-1]

    def _unsort(self, values: np.ndarray) -> np.ndarray:
        out = np.empty_like(values)
        out[self.order] = values
        return out

    def previous(self) -> np.ndarray:
        """For each change, the index of its key's previous change, or -1."""
        return self._unsort(np.where(self.starts, -1, np.roll(self.order, 1)))

    def is_last(self) -> np.ndarray:
        """Whether each change is its key's last."""
        return self._unsort(np.append(self.starts[1:], True))

    def sum_before(self, values: np.ndarray) -> np.ndarray:
        """For each change, the sum of `values` over its key's earlier changes."""
        ordered = values[self.order]
        before = np.cumsum(ordered) - ordered
        run_start = np.flatnonzero(self.starts)[np.cumsum(self.starts) - 1]
        return self._unsort(before - before[run_start])


def key_codes(table: pa.Table, nulls_match: bool) -> np.ndarray:
    """One integer per row, equal exactly when the rows' values are equal in every column. A null
    is a value like any other with `nulls_match`; without it a row with a null gets -1."""
    first, *rest = table.columns
    codes = _column_codes(first, nulls_match)
    for column in rest:
        codes = _pair(codes, _column_codes(column, nulls_match))
    return codes


def _column_codes(column: pa.ChunkedArray, nulls_match: bool) -> np.ndarray:
    if column.null_count == 0 and pa.types.is_integer(column.type):
        # The usual primary key: pandas' hash table takes a third of Arrow's dictionary
        # encoding's time on millions of integers (the race's staging: 3 s of its 17).
        return pd.factorize(column.to_numpy())[0].astype(np.int64, copy=False)
    encoded = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode" if nulls_match else "mask")
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64)


def _pair(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Codes of the pairs (first, second): each input code is below the row count, so the pair
    fits one int64 before factorize makes it small again."""
    if not len(first):
        return first
    missing = (first < 0) | (second < 0)
    codes = pd.factorize(first * (int(second.max()) + 1) + second)[0]
    codes[missing] = -1
    return codes


def rows_equal(left: pa.Table, right: pa.Table) -> bool:
    """Whether the tables hold the same values row for row (a null equals a null)."""
    for name in left.column_names:
        a, b = left.column(name), right.column(name)
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        if not pc.all(same, min_count=0).as_py():
            return False
    return True
