"""Stage an intermediate stage's Delta change data feed as the next stage's changelog.

Each Delta version the earlier stage committed (one per micro-batch) becomes one segment, so the
next stage runs one micro-batch per upstream micro-batch, and the final change feed keeps the
rhythm of the input. The feed maps onto row kinds one to one: insert = +I, update_preimage = -U,
update_postimage = +U, delete = -D. A multiset stage table (no key: every row with its `__count`)
is expanded back to single rows: a count going from 1 to 3 is two +I copies.

The staged layout is the one sources use (manifest.json + segments/), so the stream, the batch
snapshot and the micro-batch bookkeeping read both the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from jobs.changelog.columns import COUNT, FILE, KIND, LINE, SEQ, WATERMARK
from jobs.changelog.feed_spark import SparkFeedStager, stage_versions
from jobs.changelog.feed_watermarks import Watermarks, version_watermarks
from jobs.changelog.kinds import CDF_CHANGE_TYPES, RowKind, weights_of
from jobs.changelog.schema import SourceSchema, schema_of_arrow
from jobs.changelog.segments import SEGMENTS, put_in_order, segment_name
from jobs.runtime.delta import CHANGE_TYPE, COMMIT_VERSION, open_delta, read_change_feed, table_version


def stage_change_feed(
    table: Path,
    directory: Path,
    name: str,
    columns: tuple[str, ...],
    key: tuple[str, ...],
    spark: SparkSession | None = None,
    spark_directory=None,
    event_time: str | None = None,
    upstream_state: Path | None = None,
) -> int:
    """Stage the versions committed since the last call; return the number of new rows. The
    columns are typed as the table holds them (the earlier stage wrote it with its batch SQL's
    types). With `spark` (the delta-spark writer) the feed is read and staged by Spark's
    executors (feed_spark.py), which reach the staged folder at `spark_directory` (its place on
    an object store, for a cluster); without, by delta-rs on the driver.

    The manifest is written even when there is nothing new: an earlier stage that has emitted
    nothing yet (a join without matches) is an empty changelog, not a missing one."""
    (directory / SEGMENTS).mkdir(parents=True, exist_ok=True)
    schema = schema_of_arrow(pa.schema(open_delta(table).schema().to_arrow()), columns)
    manifest = _read(directory) or _new_manifest(name, schema, key)
    manifest["event_time"] = event_time
    marks = Watermarks(version_watermarks(upstream_state), event_time) if event_time and upstream_state else None
    last_version = table_version(table)
    if manifest["next_version"] > last_version:
        new_rows = 0  # nothing committed since (Delta refuses a feed range that ends before it starts)
    elif spark is not None:
        stager = SparkFeedStager(directory, manifest, schema, key, _write_manifest, spark_directory, marks)
        stage_versions(spark, table, stager)
        new_rows = stager.new_rows
    else:
        new_rows = _stage_on_driver(table, directory, manifest, schema, key, marks)
    _write_manifest(directory, manifest)
    return new_rows


def _stage_on_driver(
    table: Path, directory: Path, manifest: dict, schema: SourceSchema, key: tuple[str, ...], marks: Watermarks | None
) -> int:
    feed = read_change_feed(table, starting_version=manifest["next_version"])
    new_rows = 0
    for version in sorted(set(feed.column(COMMIT_VERSION).to_pylist())):
        rows = _rows_of(feed.filter(pc.equal(feed.column(COMMIT_VERSION), version)), schema, key)
        if rows.num_rows:
            _write_segment(directory, manifest, rows, version, marks)
            new_rows += rows.num_rows
        manifest["next_version"] = version + 1
    return new_rows


def _rows_of(version: pa.Table, schema: SourceSchema, key: tuple[str, ...]) -> pa.Table:
    """One version's changes as row kinds, each update's -U right before its +U."""
    kinds = pa.array([int(CDF_CHANGE_TYPES[t]) for t in version.column(CHANGE_TYPE).to_pylist()], pa.int8())
    if not key:
        return _expanded(version, kinds, schema)
    order = np.lexsort([kinds.to_numpy(), *[_sort_key(version.column(k)) for k in reversed(key)]])
    rows = version.select(list(schema.names)).append_column(KIND, kinds).take(pa.array(order))
    return rows


def _sort_key(column: pa.ChunkedArray) -> np.ndarray:
    """A column as sortable numbers (dictionary codes), nulls first."""
    encoded = pc.dictionary_encode(column.combine_chunks()).indices
    return pc.fill_null(encoded, -1).to_numpy(zero_copy_only=False)


def _expanded(version: pa.Table, kinds: pa.Array, schema: SourceSchema) -> pa.Table:
    """A multiset table's feed as single-copy changes: +I for each copy gained, -D for each lost."""
    counts = version.column(COUNT).to_numpy(zero_copy_only=False).astype(np.int64)
    sign = weights_of(kinds)
    signed = counts * sign
    # An update of a count is its pre- and post-image: their signed sum is the copies gained.
    rows = version.select(list(schema.names))
    net: dict[tuple, int] = {}
    first: dict[tuple, int] = {}
    for i, row in enumerate(zip(*[c.to_pylist() for c in rows.columns])):
        net[row] = net.get(row, 0) + int(signed[i])
        first.setdefault(row, i)
    index, kind = [], []
    for row, n in net.items():
        index += [first[row]] * abs(n)
        kind += [int(RowKind.INSERT if n > 0 else RowKind.DELETE)] * abs(n)
    taken = rows.take(pa.array(index, pa.int64()))
    return taken.append_column(KIND, pa.array(kind, pa.int8()))


def _write_segment(directory: Path, manifest: dict, rows: pa.Table, version: int, marks: Watermarks | None) -> None:
    first_seq = manifest["rows"]
    n = rows.num_rows
    rows = rows.append_column(LINE, pa.array(np.zeros(n, np.int32)))
    rows = rows.append_column(SEQ, pa.array(np.arange(first_seq, first_seq + n, dtype=np.int64)))
    rows = rows.append_column(FILE, pa.array([f"v{version}"] * n, pa.string()))
    stamp = marks.of(version, manifest) if marks is not None else None
    if marks is not None and stamp is not None:
        time_type = rows.schema.field(marks.column).type
        rows = rows.append_column(WATERMARK, pa.array([stamp.before] * n, pa.int64()).cast(time_type))
    path = directory / SEGMENTS / segment_name(first_seq)
    pq.write_table(rows, path)
    put_in_order(path, len(manifest["segments"]))
    manifest["segments"].append(
        {"file": f"{SEGMENTS}/{path.name}", "first_seq": first_seq, "rows": n, "version": version}
        | ({"watermark_after": stamp.after} if stamp is not None else {})
    )
    manifest["rows"] += n


def _new_manifest(name: str, schema: SourceSchema, key: tuple[str, ...]) -> dict:
    return {
        "source": name,
        "format": "delta-change-feed",
        "schema": schema.spark_ddl(),
        "primary_key": list(key),
        "event_time": None,
        "watermark": None,
        "generation": 0,
        "rows": 0,
        "quarantined": 0,
        "files": [],
        "segments": [],
        "live_state": None,
        "next_version": 0,
    }


def _read(directory: Path) -> dict | None:
    path = directory / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def _write_manifest(directory: Path, manifest: dict) -> None:
    tmp = directory / "manifest.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, directory / "manifest.json")
