"""The delta-spark writer: Delta's Spark connector merges each micro-batch's changes, still a Spark
DataFrame, from the executors; nothing of the micro-batch passes through the driver.

Exactly once through Delta's idempotent writes: the MERGE runs with the session's transaction
settings (txnAppId = the stage's application id, txnVersion = the micro-batch id), which Delta
records in the commit and refuses to apply twice. The replay check before it reads only the log.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from delta.tables import DeltaTable as SparkDeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT
from jobs.runtime.arrow_frames import frame_of
from jobs.runtime.delta import is_committed, open_delta, table_version
from jobs.runtime.delta_connector import require_connector
from jobs.stream.writers import Changes, MergeCounts
from jobs.stream.writers.merge import (
    COPIES,
    GAINS_COPIES,
    IS_DELETE,
    IS_UPSERT,
    from_source,
    key_matches,
    value_changes,
    values_differ,
    values_of,
    written_columns,
)

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# Tables readable and writable by delta-rs too: change data feed on, no deletion vectors.
PRESENT = "__present"  # marks a target row in the no-op filter's join
TABLE_OPTIONS = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "false"}


class DeltaSparkWriter:
    def __init__(self, spark: SparkSession, path: Path, key: tuple[str, ...], app_id: str):
        require_connector(spark, "the delta-spark writer")
        self.spark, self.location, self.key, self.app_id = spark, path, key, app_id
        self.path = str(path)  # as Spark reads it; the location keeps a store's options for delta-rs

    def exists(self) -> bool:
        return SparkDeltaTable.isDeltaTable(self.spark, self.path)

    def create(self, initial: pa.Table, description: str) -> None:
        writer = frame_of(self.spark, initial).write.format("delta").mode("errorifexists")
        writer.options(**TABLE_OPTIONS).option("description", description).save(self.path)

    def committed(self, batch_id: int) -> bool:
        return is_committed(open_delta(self.location), self.app_id, batch_id)

    def write(self, changes: Changes, batch_id: int, mode: str) -> MergeCounts:
        if self.committed(batch_id):
            return MergeCounts(skipped_replay=True)
        # Cached on the executors: the micro-batch's plan runs once (here), then the no-op filter
        # and the MERGE (which reads its source twice) read the cached rows.
        frame = changes.dataframe(self.spark).persist()
        try:
            if frame.isEmpty():
                return MergeCounts()
            started = time.monotonic()
            counts = self._merge_effective(frame, batch_id, mode)
            return dataclasses.replace(counts, seconds=time.monotonic() - started)
        finally:
            frame.unpersist()

    def _merge_effective(self, frame: DataFrame, batch_id: int, mode: str) -> MergeCounts:
        effective = self._effective(frame, mode).persist()
        try:
            if effective.isEmpty():
                return MergeCounts()
            merge = self._merge(effective)
            merge = self._counts(merge, frame.columns) if mode == "retract" else self._upserts(merge, frame.columns)
            with self._transaction(batch_id):
                metrics = merge.execute().first()
        finally:
            effective.unpersist()
        return MergeCounts(metrics["num_inserted_rows"], metrics["num_updated_rows"], metrics["num_deleted_rows"])

    def _effective(self, frame: DataFrame, mode: str) -> DataFrame:
        """The changes that change the table. Delta's Spark MERGE commits a version even when
        nothing matches a clause (rewriting the matched files, and in some cases logging a row
        that did not change as a delete and an insert); delta-rs commits nothing then. Left out
        here, the no-ops leave no version and no change-feed row, as with delta-rs."""
        target = self.spark.read.format("delta").load(self.path).withColumn(PRESENT, F.lit(True)).alias("t")
        joined = frame.alias("s").join(target, F.expr(key_matches(self.key)), "left")
        present = F.col(f"t.{PRESENT}").isNotNull()
        if mode == "retract":
            effective = present | F.expr(GAINS_COPIES)
        else:
            values = values_of(frame.columns, self.key)
            changed = F.expr(values_differ(values)) if values else F.lit(False)
            effective = (F.expr(IS_DELETE) & present) | (F.expr(IS_UPSERT) & (~present | changed))
        return joined.where(effective).select(*[F.col(f"s.`{c}`") for c in frame.columns])

    def _merge(self, frame):
        target = SparkDeltaTable.forPath(self.spark, self.path).alias("t")
        return target.merge(frame.alias("s"), key_matches(self.key))

    def _upserts(self, merge, columns: list[str]):
        merge = merge.whenMatchedDelete(IS_DELETE)
        values = values_of(columns, self.key)
        if values:
            merge = merge.whenMatchedUpdate(value_changes(values), from_source(values))
        return merge.whenNotMatchedInsert(IS_UPSERT, from_source(written_columns(columns)))

    def _counts(self, merge, columns: list[str]):
        return (
            merge.whenMatchedDelete(f"{COPIES} <= 0")
            .whenMatchedUpdate(set={f"`{COUNT}`": COPIES})
            .whenNotMatchedInsert(GAINS_COPIES, from_source(columns))
        )

    @contextmanager
    def _transaction(self, batch_id: int):
        self.spark.conf.set(TXN_APP_ID, self.app_id)
        self.spark.conf.set(TXN_VERSION, str(batch_id))
        try:
            yield
        finally:
            self.spark.conf.unset(TXN_APP_ID)
            self.spark.conf.unset(TXN_VERSION)

    def version(self) -> int:
        return table_version(self.location)
