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
    """The table's change data feed, with plain Arrow types (delta-rs returns string_view and
    uint64 columns, which Spark and pandas do not all take)."""
    table = pa.table(DeltaTable(str(path)).load_cdf(starting_version=starting_version).read_all())
    fields = [pa.field(f.name, _plain(f.type)) for f in table.schema]
    return table.cast(pa.schema(fields))


def _plain(dtype: pa.DataType) -> pa.DataType:
    if dtype == pa.string_view():
        return pa.string()
    if dtype == pa.uint64():
        return pa.int64()
    return dtype
