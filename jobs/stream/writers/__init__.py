"""The writers of a stage's Delta table: one micro-batch's changes, merged by key, exactly once.

Two implementations of one protocol, chosen by the spec's `sink.writer` (or `--writer`):

- delta_rs.py: delta-rs from the driver; the changes come to the driver as Arrow. Embedded,
  fastest on one machine, no JVM connector.
- delta_spark.py: Delta's Spark connector; the changes stay a Spark DataFrame and the MERGE runs
  on the executors. The cluster path.

Both create the table with its change data feed on, commit each micro-batch under a transaction
(application id, micro-batch id) so a replayed micro-batch changes nothing, and write nothing for
a micro-batch without changes: the same table, version for version, whichever writes it.
How the run's tables are read and written whole follows the same setting
(jobs/runtime/tables.py, `tables_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.runtime.arrow_frames import frame_of


@dataclass(frozen=True)
class Changes:
    """One micro-batch's rows for a writer: a Spark frame (computed on the executors) or Arrow rows
    already on the driver (the upsert materializer's, the closed windows'). Each writer takes
    the form it works on, so nothing is converted twice."""

    frame: DataFrame | None = None
    rows: pa.Table | None = None

    def arrow(self) -> pa.Table:
        if self.rows is not None:
            return self.rows
        assert self.frame is not None, "every Changes is made with a frame or with rows"
        return self.frame.toArrow()

    def dataframe(self, spark: SparkSession) -> DataFrame:
        return self.frame if self.frame is not None else frame_of(spark, self.rows)


@dataclass(frozen=True)
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    skipped_replay: bool = False
    # Time the writer spent applying the changes once they were computed (the no-op filter and the
    # MERGE's commit); the micro-batch's own query is not in it. The benchmark's MERGE share.
    seconds: float = 0.0

    def changelog(self) -> dict[str, int]:
        return {"+I": self.inserted, "-U": self.updated, "+U": self.updated, "-D": self.deleted}


class TableWriter(Protocol):
    path: str
    key: tuple[str, ...]
    app_id: str

    def exists(self) -> bool: ...

    def create(self, initial: pa.Table, description: str) -> None:
        """Create the table holding the query's result on an empty input (no rows, except for a
        global aggregate's one row), change data feed on."""

    def committed(self, batch_id: int) -> bool: ...

    def write(self, changes: Changes, batch_id: int, mode: str) -> MergeCounts:
        """Merge one micro-batch: rows tagged __op = upsert | delete (at most one per key) for an
        upsert table, rows with their copy change __count for a retract (multiset) table."""

    def version(self) -> int: ...


def open_writer(writer: str, spark: SparkSession, path: Path, key: tuple[str, ...], app_id: str) -> TableWriter:
    if writer == "delta-spark":
        from jobs.stream.writers.delta_spark import DeltaSparkWriter

        return DeltaSparkWriter(spark, path, key, app_id)
    from jobs.stream.writers.delta_rs import DeltaRsWriter

    return DeltaRsWriter(path, key, app_id)
