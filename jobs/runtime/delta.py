"""Reading Delta tables: snapshots and change data feeds, into Spark or Arrow.

Two readers; a run's sink writer chooses between them (tables.py, `tables_for`):
- delta-rs (the default): the log is read on the driver; a snapshot is its Parquet file list
  handed to spark.read.parquet, a change feed comes back as Arrow.
- Delta's Spark connector (with the delta-spark writer, and for Delta sources):
  spark.read.format("delta") with time travel and readChangeFeed, planned and read on the
  executors.
The log-only questions (the latest version, a writer's last transaction) are answered by delta-rs
for both: they read no data.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from jobs.runtime.arrow_frames import frame_of

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"


def open_delta(path, version: int | None = None, storage_options: dict[str, str] | None = None) -> DeltaTable:
    """A Delta table by delta-rs: at a local path, or on an object store with `storage_options`
    (a jobs.store.paths.StorePath carries its own)."""
    return DeltaTable(str(path), version=version, storage_options=storage_options or _options_of(path))


def is_delta_table(path, storage_options: dict[str, str] | None = None) -> bool:
    return DeltaTable.is_deltatable(str(path), storage_options=storage_options or _options_of(path))


def _options_of(path) -> dict[str, str] | None:
    return getattr(path, "storage_options", None)


def table_version(path) -> int:
    return open_delta(path).version()


def is_committed(table: DeltaTable, app_id: str, batch_id: int) -> bool:
    """Whether micro-batch `batch_id`, or a later one, is committed under `app_id` (Delta's txn
    action): a micro-batch that is, is a replay. Takes an opened table, so that a writer that
    goes on to MERGE reads the log once."""
    done = table.transaction_version(app_id)
    return done is not None and done >= batch_id


def change_data_feed_on(table: DeltaTable) -> bool:
    configuration = table.metadata().configuration
    return str(configuration.get(CHANGE_DATA_FEED, "false")).lower() == "true"


def read_snapshot(spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
    """The table (at `version`) as its Parquet files, listed by delta-rs."""
    table = open_delta(path, version)
    files = table.file_uris()
    if files:
        return spark.read.parquet(*files)
    return frame_of(spark, table.to_pyarrow_table())


def read_with_connector(spark: SparkSession, path: Path | str, version: int | None = None) -> DataFrame:
    """The table (at `version`) through Delta's Spark connector."""
    reader = spark.read.format("delta")
    return (reader.option("versionAsOf", version) if version is not None else reader).load(str(path))


def read_change_feed(path: Path, starting_version: int = 0, ending_version: int | None = None) -> pa.Table:
    """The table's change data feed from `starting_version` on (no rows when the table has no
    such version yet: nothing new), with plain Arrow types (delta-rs returns string_view and
    uint64 columns, which Spark and pandas do not all take)."""
    table = open_delta(path)
    last = table.version() if ending_version is None else min(ending_version, table.version())
    if starting_version > last:
        return _feed_schema(table).empty_table()
    feed = pa.table(table.load_cdf(starting_version=starting_version, ending_version=last).read_all())
    return feed.cast(pa.schema([pa.field(f.name, _plain(f.type)) for f in feed.schema]))


def change_feed_frame(
    spark: SparkSession, path: Path | str, starting_version: int = 0, ending_version: int | None = None
) -> DataFrame:
    """The change data feed through Delta's Spark connector, read on the executors."""
    reader = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", starting_version)
    if ending_version is not None:
        reader = reader.option("endingVersion", ending_version)
    return reader.load(str(path))


def _feed_schema(table: DeltaTable) -> pa.Schema:
    columns = [pa.field(f.name, _plain(f.type)) for f in pa.schema(table.schema().to_arrow())]
    return pa.schema(
        columns
        + [
            pa.field(CHANGE_TYPE, pa.string()),
            pa.field(COMMIT_VERSION, pa.int64()),
            pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms")),
        ]
    )


def _plain(dtype: pa.DataType) -> pa.DataType:
    if dtype == pa.string_view():
        return pa.string()
    if dtype == pa.uint64():
        return pa.int64()
    return dtype
