"""The rows a report lists besides the differences: the late events a windowed stream left out,
the changelog rows quarantined as malformed, the rows kept that break the changelog protocol.

A count alone does not say which rows; the whole table can be large. The report lists the first
LISTED_ROWS of each, in the order a reader looks for them, with the path of the full Delta table.
Times read as text in the Spark session's time zone, named (UTC by default): never raw epoch
microseconds.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from jobs.changelog.quarantine import read_quarantine
from jobs.runtime.layout import RunLayout

LISTED_ROWS = 50


def listed_rows(layout: RunLayout, late: DataFrame | None, time_zone: str) -> dict:
    """{kind: {"table", "total", "rows"}} for each kind that has rows."""
    listed = {}
    if late is not None:
        total = late.count()
        if total:
            first = late.orderBy("window_start", "op").limit(LISTED_ROWS).collect()
            listed["late_events"] = _listing(
                layout, layout.late_events, total, [_readable(r.asDict(), time_zone) for r in first]
            )
    for kind, path in (("quarantined", layout.quarantine), ("anomalies", layout.anomalies)):
        table = read_quarantine(path)
        if table.num_rows:
            listed[kind] = _listing(layout, path, table.num_rows, _first_by_place(table))
    return listed


def _listing(layout: RunLayout, path: Path, total: int, rows: list[dict]) -> dict:
    # The table's path inside the run folder: a report stays right when the folder moves.
    return {"table": layout.relative(path), "total": total, "rows": rows}


def _first_by_place(table: pa.Table) -> list[dict]:
    """The first rows by source, file and line: where a reader goes to fix them."""
    order = pc.sort_indices(table, sort_keys=[("source", "ascending"), ("file", "ascending"), ("line", "ascending")])
    return table.take(order[:LISTED_ROWS]).to_pylist()


def _readable(row: dict, time_zone: str) -> dict:
    return {name: time_text(value, time_zone) for name, value in row.items()}


def time_text(value, time_zone: str):
    """A timestamp as `2026-11-21 09:01:00 UTC` (Spark hands them over in the session's zone);
    other values as they are."""
    if isinstance(value, datetime):
        fraction = f".{value.microsecond:06d}" if value.microsecond else ""
        return f"{value:%Y-%m-%d %H:%M:%S}{fraction} {time_zone}"
    if isinstance(value, date):
        return value.isoformat()
    return value
