"""Reading Delta tables written by delta-rs into Spark and Arrow.

Spark here has no Delta connector (it is a JVM jar from Maven, which these machines cannot
reach): a snapshot is read by handing its Parquet file list to spark.read.parquet.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

CHANGE_TYPE, COMMIT_VERSION = "_change_type", "_commit_version"


def read_snapshot(spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
    table = DeltaTable(str(path), version=version)
    files = table.file_uris()
    if files:
        return spark.read.parquet(*files)
    return spark.createDataFrame(table.to_pyarrow_table())


def read_change_feed(path: Path, starting_version: int = 0) -> pa.Table:
    """The table's change data feed from `starting_version` on (no rows when the table has no
    such version yet: nothing new), with plain Arrow types (delta-rs returns string_view and
    uint64 columns, which Spark and pandas do not all take)."""
    table = DeltaTable(str(path))
    if starting_version > table.version():
        return _feed_schema(table).empty_table()
    feed = pa.table(table.load_cdf(starting_version=starting_version).read_all())
    return feed.cast(pa.schema([pa.field(f.name, _plain(f.type)) for f in feed.schema]))


def _feed_schema(table: DeltaTable) -> pa.Schema:
    columns = [pa.field(f.name, _plain(f.type)) for f in pa.schema(table.schema().to_arrow())]
    return pa.schema(columns + [pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64()),
                                pa.field("_commit_timestamp", pa.timestamp("ms"))])


def _plain(dtype: pa.DataType) -> pa.DataType:
    if dtype == pa.string_view():
        return pa.string()
    if dtype == pa.uint64():
        return pa.int64()
    return dtype
