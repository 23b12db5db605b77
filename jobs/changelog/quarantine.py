"""The quarantine table: changelog rows that a source with `on_bad_rows: quarantine` set aside.

A Delta table beside the sink, one row per bad line with the reason and the raw text. Appends are
idempotent: each staging generation commits under its own transaction id, so a staging run that
crashed after this append and is repeated does not add the rows twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from jobs.runtime.delta import is_committed, is_delta_table, open_delta

SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("file", pa.string()),
        ("line", pa.int32()),
        ("reason", pa.string()),
        ("raw", pa.string()),
    ]
)


def quarantine_table(rows: Sequence) -> pa.Table:
    """Bad rows (with source, file, line, reason and raw attributes) as the table's rows."""
    return pa.Table.from_pylist([vars(r) for r in rows], schema=SCHEMA)


def append_quarantine(path: Path, table: pa.Table, *, app_id: str, version: int) -> None:
    if table.num_rows == 0:
        return
    if _already_committed(path, app_id, version):
        return
    write_deltalake(
        str(path),
        table,
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
    )


def read_quarantine(path: Path) -> pa.Table:
    if not is_delta_table(path):
        return SCHEMA.empty_table()
    return open_delta(path).to_pyarrow_table()


def _already_committed(path: Path, app_id: str, version: int) -> bool:
    if not is_delta_table(path):
        return False
    return is_committed(open_delta(path), app_id, version)
