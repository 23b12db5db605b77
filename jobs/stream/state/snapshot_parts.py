"""A keyed state's snapshot as part files of key ranges, folded one range at a time.

A snapshot folder (live_state.py) holds `part-<i>.parquet` files in key order, each of about
`part_rows` rows and never splitting one key's rows, and `_bounds.parquet`: the first key of
every part (keys as Spark compares them: -0.0 as 0.0, one NaN). A key belongs to the last part
whose first key is at or below it; the first part also takes every key below its own. Hence:

- a fold reads one part and the log rows of its range at a time, so its memory is the logs and
  one part, not the whole state (a state of 50 M groups folded whole held gigabytes in Python);
- a part that no log row falls in is linked into the new snapshot as it is, where folding cannot
  change folded rows (not so with a state TTL, which forgets by time);
- a reader of touched keys opens only the parts their keys fall in.

A snapshot without `_bounds.parquet` (written before parts existed, or of keys Arrow cannot sort)
is one range: every file of its folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.changelog.schema import all_nullable
from jobs.stream.state.row_counts import row_codes, spark_normalized

BOUNDS = "_bounds.parquet"  # the leading underscore: Arrow's and Spark's folder readers skip it
# Rows per row group of a part: a reader skips the groups whose first key column holds none of
# the touched keys, so smaller groups skip more, at some cost in metadata per group.
ROW_GROUP = 65_536
_ROW_MARK = "__row"  # sorts a bound before a row of equal key: that row is in the bound's part


@dataclass(frozen=True)
class Snapshot:
    folder: Path
    keys: tuple[str, ...]

    def parts(self) -> list[list[str]]:
        """The files of each range, in key order (one range, the whole folder, without bounds)."""
        if not (self.folder / BOUNDS).exists():
            return [[str(self.folder)]]
        return [[str(p)] for p in sorted(self.folder.glob("part-*.parquet"))]

    def bounds(self) -> pa.Table | None:
        path = self.folder / BOUNDS
        return pq.read_table(path) if path.exists() else None

    def files_for(self, wanted: pa.Table | None) -> list[str]:
        """The files that may hold rows of the wanted keys (every file for None)."""
        parts = self.parts()
        if wanted is None or len(parts) == 1:
            return [f for part in parts for f in part]
        try:
            chosen = np.unique(part_of(wanted, self.bounds(), self.keys))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return [f for part in parts for f in part]  # keys that do not compare: read them all
        return [f for i in chosen for f in parts[i]]


def part_of(rows: pa.Table, bounds: pa.Table | None, keys: tuple[str, ...]) -> np.ndarray:
    """Per row of `rows`, the index of the part its key falls in: how many parts after the first
    begin at or below it."""
    if bounds is None or bounds.num_rows <= 1:
        return np.zeros(rows.num_rows, np.int64)
    starts = _comparable(bounds.slice(1), keys)
    mine = _comparable(rows, keys).cast(starts.schema)
    marks = pa.array(np.concatenate([np.zeros(starts.num_rows, np.int8), np.ones(mine.num_rows, np.int8)]))
    both = pa.concat_tables([starts, mine]).append_column(_ROW_MARK, marks)
    order = pc.sort_indices(both, sort_keys=_ordering((*keys, _ROW_MARK))).to_numpy()
    is_start = marks.to_numpy()[order] == 0
    before = np.cumsum(is_start)  # parts begun at or before each sorted position
    parts = np.empty(mine.num_rows, np.int64)
    rows_at = ~is_start
    parts[order[rows_at] - starts.num_rows] = before[rows_at]
    return parts


def fold_parts(
    old: Snapshot | None,
    logs: pa.Table,
    keys: tuple[str, ...],
    fold: Callable[[pa.Table], pa.Table],
    read: Callable[[list[str]], pa.Table],
    target: Path,
    part_rows: int,
    carry: bool,
) -> None:
    """Write into the empty folder `target` the fold of `old`'s rows and the `logs`, range by
    range, as parts keyed by `keys`. `read` reads files in the state's types; `carry`: a folded
    part with no log rows in its range is linked as it is."""
    parts = old.parts() if old is not None else []
    bounds = old.bounds() if old is not None else None
    if not parts:
        parts = [[]]
    ranges = part_of(logs, bounds, keys)
    order = np.argsort(ranges, kind="stable")  # the logs' rows range by range, each range a slice
    by_range, starts = logs.take(pa.array(order)), np.searchsorted(ranges[order], np.arange(len(parts) + 1))
    written = _Parts(target, keys, part_rows)
    for i, files in enumerate(parts):
        mine = by_range.slice(starts[i], starts[i + 1] - starts[i])
        if carry and bounds is not None and mine.num_rows == 0:
            written.link(files[0], bounds.slice(i, 1))
        else:
            written.add(fold(pa.concat_tables([read(files), mine]) if files else mine))
    written.close(logs.schema)


class _Parts:
    """The parts of a new snapshot, written in key order, with their bounds."""

    def __init__(self, target: Path, keys: tuple[str, ...], part_rows: int):
        self.target, self.keys, self.part_rows = target, keys, part_rows
        self.bounds: list[pa.Table] = []
        self.sortable = True

    def add(self, rows: pa.Table) -> None:
        """Folded rows of one range, written as parts of about part_rows rows each."""
        if rows.num_rows == 0:
            return
        ordered = _sorted(rows, self.keys)
        if ordered is None:  # keys Arrow cannot sort: one range, one part (no bounds)
            self.sortable, ordered, cuts = False, rows, [0, rows.num_rows]
        else:
            cuts = _cuts(ordered, self.keys, self.part_rows)
        for start, end in zip(cuts, cuts[1:]):
            part = ordered.slice(start, end - start)
            pq.write_table(part, self._next_path(), row_group_size=ROW_GROUP)
            self.bounds.append(_comparable(part.slice(0, 1), self.keys))

    def link(self, path: str, bound: pa.Table) -> None:
        """An unchanged part, kept by a hard link (a copy where the file system has none)."""
        destination = self._next_path()
        try:
            os.link(path, destination)
        except OSError:
            shutil.copyfile(path, destination)
        self.bounds.append(bound)

    def close(self, schema: pa.Schema) -> None:
        if not self.bounds:  # no live row: one empty part, so that readers find the columns
            pq.write_table(schema.empty_table(), self._next_path())
            return
        if self.sortable and self.keys:
            bounds = pa.concat_tables([b.cast(self.bounds[0].schema) for b in self.bounds])
            pq.write_table(bounds, self.target / BOUNDS)

    def _next_path(self) -> Path:
        return self.target / f"part-{len(self.bounds):05d}.parquet"


def _cuts(ordered: pa.Table, keys: tuple[str, ...], part_rows: int) -> list[int]:
    """Where to cut sorted rows into parts of at least part_rows rows (the last may be short),
    only where the key changes: one key's rows stay in one part."""
    n, cuts = ordered.num_rows, [0]
    while keys and cuts[-1] + part_rows < n:
        cut = _next_key_change(ordered, keys, cuts[-1] + part_rows)
        if cut is None:
            break
        cuts.append(cut)
    return cuts + [n]


def _next_key_change(ordered: pa.Table, keys: tuple[str, ...], at: int) -> int | None:
    """The first row at or after `at` whose key differs from the row before it, looking at a
    few rows around it rather than coding every key of the table."""
    window = 64
    while True:
        codes = row_codes(_comparable(ordered.slice(at - 1, window + 1), keys))
        changes = np.flatnonzero(codes[1:] != codes[:-1])
        if len(changes):
            return at + int(changes[0])
        if at + window >= ordered.num_rows:  # the window reached the last row
            return None
        window *= 4


def _sorted(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table | None:
    """The rows in key order, as Spark compares keys; None for keys Arrow cannot sort (nested)."""
    if not keys:
        return None
    try:
        return rows.take(pc.sort_indices(_comparable(rows, keys), sort_keys=_ordering(keys)))
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _comparable(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The key columns as Spark compares them (all nullable, so bounds of any part concatenate)."""
    return spark_normalized(all_nullable(rows.select(list(keys))))


def _ordering(keys: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return [(k, "ascending", "at_start") for k in keys]
