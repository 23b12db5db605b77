"""The few file operations whose local form a store does differently, for code that works on a run
folder wherever it is: a local Path or a StorePath (paths.py). Everything else is pathlib's
interface, which both have."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.store.paths import StorePath

RunPath: TypeAlias = Path | StorePath


def replace_whole(path: RunPath, content: str | bytes) -> None:
    """Replace a file so that a crash leaves the old content or the new, never half of either:
    on a local disk a temporary file renamed over it, on a store one PUT."""
    data = content.encode() if isinstance(content, str) else content
    if isinstance(path, StorePath):
        path.write_bytes(data)
        return
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def remove_tree(path: RunPath) -> None:
    """A folder and everything in it; nothing when it is not there."""
    if isinstance(path, StorePath):
        path.remove_tree()
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_parquet(table: pa.Table, path: RunPath) -> None:
    """A Parquet file written whole: a store gets it in one PUT, never half seen."""
    if isinstance(path, StorePath):
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        path.write_bytes(buffer.getvalue())
    else:
        pq.write_table(table, path)


def read_parquet_folder(folder: RunPath) -> pa.Table:
    """Every Parquet file in a folder, as one table."""
    if not isinstance(folder, StorePath):
        return pq.read_table(folder)
    parts = [pq.read_table(pa.BufferReader(p.read_bytes())) for p in folder.glob("*.parquet")]
    return pa.concat_tables(parts)
