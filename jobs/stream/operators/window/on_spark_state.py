"""`emit: final` on the spark engine: the open windows as a Delta table written by delta-spark, on
the executors (FinalWindowEmitter in windows.py keeps the same table with delta-rs, on the
driver).

Per micro-batch: the touched windows' rows (the aggregate's or the sessions' emitter's, with each
row's window end as a hidden column) are MERGEd into the open-windows table; the windows whose
end the watermark after the micro-batch has reached go to the sink, as upserts; once the sink
has committed, they leave the table. Each of the three writes has its own transaction id, so a
micro-batch replayed after a crash between them finds what was already written and writes the
rest: the closing windows are read from the table as it stands, before they leave it.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.columns import DELETE, OP, UPSERT, WINDOW_END
from jobs.runtime.delta import table_version
from jobs.stream.operators.window.windows import OpenWindows
from jobs.stream.writers import Changes, MergeCounts, TableWriter
from jobs.stream.writers.delta_spark import DeltaSparkWriter


class FinalWindowsTable(OpenWindows[DeltaSparkWriter]):
    """Wraps the aggregate's or the sessions' emitter, as FinalWindowEmitter does."""

    def __init__(self, spark: SparkSession, inner, pending_path: Path, key: tuple[str, ...], app_id: str):
        super().__init__(inner, lambda app: DeltaSparkWriter(spark, pending_path, key, app), app_id)
        self.spark, self.location, self.path = spark, pending_path, str(pending_path)
        self._closing: DataFrame | None = None

    def changes(self, spark: SparkSession, updated: DataFrame, batch) -> Changes:
        touched = self.inner.changed_frame(spark, updated, batch, hidden=self.hidden)
        self.pending.write(Changes(frame=touched), batch.id, "upsert")
        closing = self._open_windows()
        if batch.watermark_after is None:
            closing = closing.limit(0)
        else:
            closing = closing.where(F.unix_micros(F.col(WINDOW_END)) <= F.lit(batch.watermark_after))
        self._closing = self.shown(closing)
        return Changes(frame=self._closing.withColumn(OP, F.lit(UPSERT)))

    def after_sink_commit(self, batch) -> None:
        assert self._closing is not None, "the handler calls changes() before after_sink_commit()"
        self.closer.write(Changes(frame=self._closing.withColumn(OP, F.lit(DELETE))), batch.id, "upsert")

    def latest_open_end(self) -> int | None:
        """The end (microseconds) of the latest window still open, if any: one number to the driver."""
        row = self._open_windows().agg(F.max(F.unix_micros(F.col(WINDOW_END)))).first()
        return None if row is None else row[0]

    def close_all(self, sink: TableWriter, version: int) -> MergeCounts:
        """The end of a bounded input: every open window goes to the sink (see FinalWindowEmitter)."""
        rows = self.shown(self._open_windows())
        merged = sink.write(Changes(frame=rows.withColumn(OP, F.lit(UPSERT))), version, "upsert")
        self.end_closer.write(Changes(frame=rows.withColumn(OP, F.lit(DELETE))), version, "upsert")
        return merged

    def _open_windows(self) -> DataFrame:
        """The table at its current version, pinned: a frame read twice sees the same rows."""
        version = table_version(self.location)
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.path)
