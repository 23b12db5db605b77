"""A large live state split by key into parts on disk, so that checking a file holds one part at
a time: staging's memory then stays flat however many keys are live.

Part i of n holds the rows whose key hashes to i modulo n. The protocol is checked per key (per
distinct row for a multiset), so a part's changes are checked against that part's live rows
alone and the answer is the whole state's. n only doubles: part i of n splits into parts i and
i + n of 2n, each built from one old part.

The hash only decides where a key lives. It must give equal keys the same part: integers are
hashed as int64 (a null as 0), floats after -0.0 becomes 0.0, everything else as its text, so
two keys the check calls equal never land in different parts (unequal ones may share one).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_MIX = np.uint64(0x9E3779B97F4A7C15)  # spreads one column's hash before the next is mixed in


def key_hashes(table: pa.Table, columns: list[str]) -> np.ndarray:
    """One uint64 per row, equal for rows whose `columns` hold equal values."""
    hashes = np.zeros(table.num_rows, np.uint64)
    for name in columns:
        with np.errstate(over="ignore"):
            hashes = (hashes * _MIX) ^ _column_hashes(table.column(name))
    return hashes


def _column_hashes(column: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_integer(column.type):
        values = pc.fill_null(pc.cast(column, pa.int64()), 0).to_numpy()
    elif pa.types.is_floating(column.type):
        zero = pa.scalar(0.0, column.type)
        values = pc.fill_null(pc.add(column, zero), zero).to_numpy()  # -0.0 + 0.0 is 0.0
        values = np.where(np.isnan(values), np.nan, values)  # one NaN, whatever its payload
    else:
        values = np.asarray(_texts(column), dtype=object)
    return pd.util.hash_array(values, categorize=False)


def _texts(column: pa.ChunkedArray) -> list:
    try:
        return pc.fill_null(pc.cast(column, pa.large_string()), "").to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # bytes that are not UTF-8, nested values
        return [repr(value) for value in column.to_pylist()]


class LiveParts:
    """The parts' files: those a previous run committed (read, never written) and those this run
    rewrote, in its own folder until `save` moves them into the next generation."""

    def __init__(self, spill: Path, files: list[Path]):
        self.spill, self.files = spill, files
        spill.mkdir(parents=True, exist_ok=True)
        self.counts = [pq.read_metadata(f).num_rows for f in files]

    @classmethod
    def split(cls, table: pa.Table, columns: list[str], parts: int, spill: Path) -> LiveParts:
        """The state held in memory until now, written as `parts` parts."""
        spill.mkdir(parents=True, exist_ok=True)  # before the first part lands in it
        return cls(spill, _write_parts(table, columns, parts, range(parts), spill))

    def __len__(self) -> int:
        return len(self.files)

    def read(self, i: int, schema: pa.Schema) -> pa.Table:
        return pq.read_table(self.files[i]).cast(schema)

    def write(self, i: int, table: pa.Table) -> None:
        self.files[i] = _write(table, self.spill / f"{len(self.files)}-{i:05d}.parquet")
        self.counts[i] = table.num_rows

    def double(self, columns: list[str], schema: pa.Schema) -> None:
        """Twice as many parts: each old part's rows split between i and i + n."""
        n, new = len(self.files), [Path()] * (2 * len(self.files))
        for i, path in enumerate(list(self.files)):
            new[i], new[i + n] = _write_parts(pq.read_table(path).cast(schema), columns, 2 * n, (i, i + n), self.spill)
            if path.parent == self.spill:
                path.unlink()
        self.files = new
        self.counts = [pq.read_metadata(f).num_rows for f in new]

    def save(self, folder: Path) -> None:
        """The parts as folder/part-<i>.parquet: this run's moved, a committed one's linked (its
        generation stays whole until the manifest names the new one). A folder of the same name
        is what a run that crashed before its manifest left: never the committed state."""
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for i, path in enumerate(self.files):
            target = folder / f"part-{i:05d}.parquet"
            if path.parent == self.spill:
                os.replace(path, target)
            else:
                _link_or_copy(path, target)
            self.files[i] = target

    @staticmethod
    def of(folder: Path, spill: Path) -> LiveParts:
        return LiveParts(spill, sorted(folder.glob("part-*.parquet")))


def _write_parts(table: pa.Table, columns: list[str], parts: int, wanted: Iterable[int], spill: Path) -> list[Path]:
    """The rows of `table` that fall in each of the parts `wanted` (of `parts`), one file each."""
    where = key_hashes(table, columns) % np.uint64(parts)
    return [_write(table.take(np.flatnonzero(where == i)), spill / f"{parts}-{i:05d}.parquet") for i in wanted]


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path, use_dictionary=False)  # mostly distinct keys: see segments.py
    return path


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or no hard links there
        shutil.copyfile(source, target)
