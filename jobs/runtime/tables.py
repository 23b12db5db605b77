"""A run's Delta tables read and written whole, the way its sink writer works (`sink.writer`):
the batch job's result, the check's snapshots and change feed, the stage tables' feeds.
`tables_for` is the one place that turns the writer's name into how; nothing else asks which
writer a run has. The micro-batch MERGEs are the writers' own (jobs/stream/writers).

- delta-rs: snapshots read from the Parquet files the log lists, a change feed as Arrow, a
  result collected as Arrow and written by the driver.
- delta-spark: Delta's Spark connector reads and writes them on the executors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.transaction import CommitProperties
from pyspark.sql import DataFrame, SparkSession

from jobs.runtime.delta import change_feed_frame, read_change_feed, read_snapshot, read_with_connector
from jobs.runtime.delta_connector import require_connector


class WholeTables(Protocol):
    uses_connector: bool
    """Delta's Spark connector reads them on the executors (change feeds included)."""

    def read(self, spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
        """The table at `version` (the latest without one)."""

    def change_feed(self, spark: SparkSession, path: Path, last_version: int) -> pa.Table | DataFrame:
        """The table's change data feed up to `last_version`: an Arrow table when the writer
        reads it into the driver, else a DataFrame read on the executors."""

    def overwrite(self, result: DataFrame, path: Path, metadata: dict) -> int:
        """Replace the table with `result`, `metadata` in the commit; its row count."""


def tables_for(writer: str) -> WholeTables:
    return DeltaSparkTables() if writer == "delta-spark" else DeltaRsTables()


class DeltaRsTables:
    uses_connector = False

    def read(self, spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
        return read_snapshot(spark, path, version)

    def change_feed(self, spark: SparkSession, path: Path, last_version: int) -> pa.Table:
        return read_change_feed(path, 0, last_version)

    def overwrite(self, result: DataFrame, path: Path, metadata: dict) -> int:
        table = result.toArrow()
        write_deltalake(
            str(path),
            table,
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=CommitProperties(custom_metadata=metadata),
        )
        return table.num_rows


class DeltaSparkTables:
    uses_connector = True

    def read(self, spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
        return read_with_connector(spark, path, version)

    def change_feed(self, spark: SparkSession, path: Path, last_version: int) -> DataFrame:
        return change_feed_frame(spark, path, 0, last_version)

    def overwrite(self, result: DataFrame, path: Path, metadata: dict) -> int:
        """The metadata rides in the commit's userMetadata."""
        require_connector(result.sparkSession, "the delta-spark writer")
        result = result.persist()
        try:
            (
                result.write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .option("userMetadata", json.dumps(metadata))
                .save(str(path))
            )
            return result.count()
        finally:
            result.unpersist()
