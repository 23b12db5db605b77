"""A source of `format: delta`: an existing Delta table's change data feed as a changelog.

The changelog starts with the snapshot of the starting version (its rows as +I), then every later
version's change data feed: insert, update_preimage, update_postimage and delete as +I, -U, +U and
-D. A version is one piece of the staged changelog (as a file is for a folder source), so the
table's versions are the stream's offsets: a rerun stages the versions committed since.

Read through Delta's Spark connector (time travel and readChangeFeed, which apply deletion
vectors and column mapping); the rows come to the driver as Arrow to be validated and numbered
like any source's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from jobs.changelog.columns import KIND, LINE
from jobs.changelog.formats import ParsedFile
from jobs.changelog.kinds import CDF_CHANGE_TYPES, RowKind
from jobs.changelog.schema import SourceSchema, parse_schema
from jobs.errors import InputError
from jobs.runtime.delta import CHANGE_TYPE, COMMIT_VERSION, change_data_feed_on, change_feed_frame, read_with_connector
from jobs.runtime.delta_connector import require_connector
from jobs.spec.model import SourceSpec
from jobs.store.tables import is_table, open_table, readable_by


@dataclass(frozen=True)
class VersionPiece:
    version: int
    parsed: ParsedFile  # the version's changes: the columns, __kind and __line (1, 2, ... within it)

    @property
    def name(self) -> str:
        return f"v{self.version}"


def new_versions(
    spark: SparkSession, name: str, spec: SourceSpec, schema: SourceSchema, staged_versions: list[int]
) -> Iterator[VersionPiece]:
    """The pieces after the versions already staged: first the starting snapshot, then one per
    committed version (an empty one for a version without data changes)."""
    require_connector(spark, f"source {name} (format: delta)")
    check_table(name, spec)
    if not staged_versions:
        start = starting_version(name, spec)
        yield VersionPiece(start, _snapshot(spark, spec, schema, start))
        next_version = start + 1
    else:
        next_version = max(staged_versions) + 1
    latest = open_table(spec.table_path).version()
    if next_version > latest:
        return
    feed = _change_feed(spark, name, spec, schema, next_version, latest)
    versions = feed.column(COMMIT_VERSION).to_numpy()
    for version in range(next_version, latest + 1):
        rows = feed.filter(pa.array(versions == version))
        yield VersionPiece(version, _changes(rows, schema, spec.primary_key))


def starting_version(name: str, spec: SourceSpec) -> int:
    """The spec's starting version, or the latest version committed at or before its
    starting timestamp; version 0 when it gives neither."""
    if spec.starting_timestamp is None:
        start, latest = spec.starting_version or 0, open_table(spec.table_path).version()
        if start > latest:
            raise InputError(
                f"source {name}: starting_version {start} is past the table's latest version {latest}",
                where=str(spec.table_path),
            )
        return start
    wanted = spec.starting_timestamp
    wanted = wanted if wanted.tzinfo else wanted.replace(tzinfo=UTC)
    history = open_table(spec.table_path).history()
    commits = [(c["version"], datetime.fromtimestamp(c["timestamp"] / 1000, UTC)) for c in history]
    before = [version for version, at in commits if at <= wanted]
    if not before:
        first = min(at for _, at in commits)
        raise InputError(
            f"source {name}: no version was committed at or before starting_timestamp {wanted:%Y-%m-%d %H:%M:%S%z} "
            f"(the first commit is at {first:%Y-%m-%d %H:%M:%S%z})",
            where=str(spec.table_path),
        )
    return max(before)


def check_table(name: str, spec: SourceSpec) -> None:
    """A Delta table with its change data feed on and the declared columns: checked from the log
    alone, before Spark starts, so a wrong path is one line at once."""
    path, schema = spec.table_path, parse_schema(spec.schema_ddl, where=f"source {name}: schema")
    if not is_table(path):
        raise InputError(f"source {name}: not a Delta table (no _delta_log here)", where=str(path))
    table = open_table(path)
    if not change_data_feed_on(table):
        raise InputError(
            f"source {name}: the Delta table's change data feed is off; turn it on with "
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true) "
            f"and start after that version (starting_version)",
            where=str(path),
        )
    present = {f.name.lower() for f in pa.schema(table.schema().to_arrow())}
    missing = [c for c in schema.names if c.lower() not in present]
    if missing:
        raise InputError(
            f"source {name}: the schema names {', '.join(missing)}, which the Delta table does not have",
            where=str(path),
        )


def _snapshot(spark: SparkSession, spec: SourceSpec, schema: SourceSchema, version: int) -> ParsedFile:
    rows = read_with_connector(spark, _for_spark(spark, spec), version)
    table = _typed(rows.select(*[f"`{c}`" for c in schema.names]).toArrow(), schema, spec.table_path, version)
    kinds = pa.array(np.full(table.num_rows, int(RowKind.INSERT), np.int8))
    return _parsed(_ordered(table, kinds, spec.primary_key))


def _change_feed(
    spark: SparkSession, name: str, spec: SourceSpec, schema: SourceSchema, first: int, last: int
) -> pa.Table:
    try:
        frame = change_feed_frame(spark, _for_spark(spark, spec), first, last)
        return frame.select(*[f"`{c}`" for c in schema.names], CHANGE_TYPE, COMMIT_VERSION).toArrow()
    except (PySparkException, Py4JJavaError) as exc:  # a version without a feed (turned on later), or vacuumed
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"source {name}: cannot read the change data feed of versions {first} to {last}: {first_line}",
            where=str(spec.table_path),
        ) from None


def _changes(rows: pa.Table, schema: SourceSchema, key: tuple[str, ...]) -> ParsedFile:
    kinds = pa.array([int(CDF_CHANGE_TYPES[t]) for t in rows.column(CHANGE_TYPE).to_pylist()], pa.int8())
    table = _typed(rows.select(list(schema.names)), schema, None, None)
    return _parsed(_ordered(table, kinds, key))


def _ordered(table: pa.Table, kinds: pa.Array, key: tuple[str, ...]) -> pa.Table:
    """A version's changes have no order of their own; per key the retractions come first, so a
    row deleted and inserted again in one commit, and an update's -U and +U, read as a changelog."""
    if table.num_rows == 0 or not key:
        return table.append_column(KIND, kinds)
    additions = np.isin(kinds.to_numpy(), [RowKind.INSERT, RowKind.UPDATE_AFTER]).astype(np.int8)
    codes = [
        pc.fill_null(pc.dictionary_encode(table.column(k).combine_chunks()).indices, -1).to_numpy(zero_copy_only=False)
        for k in reversed(key)
    ]
    order = np.lexsort([additions, *codes])
    return table.append_column(KIND, kinds).take(pa.array(order))


def _typed(table: pa.Table, schema: SourceSchema, path: Path | str | None, version: int | None) -> pa.Table:
    try:
        return table.rename_columns(list(schema.names)).cast(schema.arrow())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        where = f"{path}@v{version}" if path is not None else None
        raise InputError(f"the Delta table's columns do not fit the declared schema: {exc}", where=where) from None


def _parsed(rows: pa.Table) -> ParsedFile:
    lines = pa.array(np.arange(1, rows.num_rows + 1, dtype=np.int32))
    return ParsedFile(rows.append_column(LINE, lines), ())


def row_text(parsed: ParsedFile, lines: set[int]) -> dict[int, str]:
    """Rows as JSON, for the quarantine's raw text (a Delta row has no line of its own)."""
    found = parsed.rows.filter(pc.is_in(parsed.rows.column(LINE), value_set=pa.array(sorted(lines), pa.int32())))
    return {
        row[LINE]: json.dumps({k: v for k, v in row.items() if k != LINE}, default=str) for row in found.to_pylist()
    }


def consumed_version(manifest: dict, consumed: int) -> int | None:
    """The table version the first `consumed` staged rows bring the source to, None when they
    stop inside a version (the stream consumed part of its changes)."""
    ends = [entry["version"] for entry in manifest["files"] if entry["first_seq"] + entry["rows"] == consumed]
    return max(ends) if ends else None


def table_as_of(spark: SparkSession, spec: SourceSpec, schema: SourceSchema, version: int):
    """The Delta table at `version` (time travel), as the declared columns and types."""
    rows = read_with_connector(spark, _for_spark(spark, spec), version)
    return rows.select(*[rows[f"`{c.name}`"].cast(c.spark_type).alias(c.name) for c in schema.columns])


def _for_spark(spark: SparkSession, spec: SourceSpec) -> str:
    return readable_by(spark, spec.table_path, f"a Delta source at {spec.table_path}")
