"""Stage an earlier stage's change data feed through Delta's Spark connector (the delta-spark
writer): Delta's streaming readChangeFeed source from the first version not staged yet, each
committed version written as one segment by the executors, so nothing of the stage passes through
the driver.

The result is the staged layout feed.py writes with delta-rs (manifest.json + segments/, one
segment per version, the same rows): a stage's next one reads it the same way whoever wrote it.
The manifest's `next_version` is the commit point, as on the driver: a version staged before a crash
is not staged again. The feed query's own checkpoint is scratch, started afresh from the manifest's
version on every call: kept across calls it would be a second commit point to keep in step with
the first (and a resumed one fails on a range Delta finds empty).
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, FILE, KIND, LINE, SEQ, WATERMARK
from jobs.changelog.feed_watermarks import VersionWatermarks, Watermarks
from jobs.changelog.kinds import CDF_CHANGE_TYPES, RowKind
from jobs.changelog.schema import SourceSchema
from jobs.changelog.segments import SEGMENTS, put_in_order, segment_name
from jobs.runtime.delta import CHANGE_TYPE, COMMIT_VERSION
from jobs.store.files import RunPath, remove_tree, replace_whole

FEED_CHECKPOINT = "_feed_checkpoint"  # scratch: see the module docstring


class SparkFeedStager:
    """The foreachBatch function of the feed's streaming query: stage each new version."""

    def __init__(
        self,
        directory: Path,
        manifest: dict,
        schema: SourceSchema,
        key: tuple[str, ...],
        save_manifest,
        spark_directory: RunPath | None = None,
        marks: Watermarks | None = None,
    ):
        self.directory, self.manifest, self.schema, self.key = directory, manifest, schema, key
        self.marks = marks
        self.save_manifest = save_manifest
        # Where the executors write: the staged folder, or its place on an object store when
        # they cannot see this host's (a cluster with the run folder on a store).
        self.spark_directory: RunPath = spark_directory if spark_directory is not None else directory
        self.new_rows = 0

    def __call__(self, feed: DataFrame, batch_id: int) -> None:
        feed = feed.persist()
        try:
            versions = sorted(r[0] for r in feed.select(COMMIT_VERSION).distinct().collect())
            for version in (v for v in versions if v >= self.manifest["next_version"]):
                self._stage(feed.where(F.col(COMMIT_VERSION) == version), version)
        finally:
            feed.unpersist()

    def _stage(self, version_rows: DataFrame, version: int) -> None:
        rows = self._kinds(version_rows)
        first_seq = self.manifest["rows"]
        n = rows.count()
        if n:
            stamp = self.marks.of(version, self.manifest) if self.marks is not None else None
            self._write_segment(rows, version, first_seq, stamp)
            self.manifest["segments"].append(
                {"file": f"{SEGMENTS}/{segment_name(first_seq)}", "first_seq": first_seq, "rows": n, "version": version}
                | ({"watermark_after": stamp.after} if stamp is not None else {})
            )
            self.manifest["rows"] += n
            self.new_rows += n
        self.manifest["next_version"] = version + 1
        self.save_manifest(self.directory, self.manifest)

    def _kinds(self, version_rows: DataFrame) -> DataFrame:
        kinds = F.create_map(*[x for t, k in CDF_CHANGE_TYPES.items() for x in (F.lit(t), F.lit(int(k)))])
        rows = version_rows.withColumn(KIND, kinds[F.col(CHANGE_TYPE)].cast("tinyint"))
        if not self.key:
            return _expanded(rows, self.schema)
        order = [F.col(f"`{k}`").asc_nulls_first() for k in self.key] + [F.col(KIND)]
        return rows.select(*_typed_columns(self.schema), KIND).orderBy(*order)

    def _write_segment(self, rows: DataFrame, version: int, first_seq: int, stamp: VersionWatermarks | None) -> None:
        """One Parquet file written by one task (the rows keep their order and get consecutive
        sequence numbers), moved into place under the segment's name and ordinal mtime."""
        numbered = rows.withColumn(
            SEQ,
            F.lit(first_seq - 1) + F.row_number().over(Window.orderBy(F.monotonically_increasing_id())).cast("bigint"),
        )
        numbered = numbered.select(
            *[F.col(f"`{n}`") for n in self.schema.names],
            KIND,
            F.lit(0).cast("int").alias(LINE),
            SEQ,
            F.lit(f"v{version}").alias(FILE),
            *self._watermark(rows, stamp),
        )
        scratch = self.spark_directory / f"_writing-{first_seq}"
        numbered.coalesce(1).write.mode("overwrite").parquet(str(scratch))
        target = self.directory / SEGMENTS / segment_name(first_seq)
        _take_part(scratch, target)
        put_in_order(target, len(self.manifest["segments"]))

    def _watermark(self, rows: DataFrame, stamp: VersionWatermarks | None) -> list:
        if stamp is None or self.marks is None:
            return []
        time_type = rows.schema[self.marks.column].dataType
        micros = F.lit(stamp.before).cast("bigint")
        return [F.timestamp_micros(micros).cast(time_type).alias(WATERMARK)]


def _take_part(scratch: RunPath, target: Path) -> None:
    """The one Parquet file Spark wrote into `scratch`, moved to `target` in the working folder
    (downloaded, from a store), then the scratch folder removed."""
    if isinstance(scratch, Path):
        os.replace(next(scratch.glob("part-*.parquet")), target)
    else:
        replace_whole(target, next(scratch.glob("part-*.parquet")).read_bytes())
    remove_tree(scratch)


def _expanded(rows: DataFrame, schema: SourceSchema) -> DataFrame:
    """A multiset table's feed as single-copy changes: +I for each copy gained, -D for each lost
    (an update of a count is its pre- and post-image; their signed sum is the copies gained)."""
    retracts = F.col(KIND).isin(int(RowKind.UPDATE_BEFORE), int(RowKind.DELETE))
    signed = F.when(retracts, -F.col(COUNT)).otherwise(F.col(COUNT))
    net = rows.groupBy(*_typed_columns(schema)).agg(F.sum(signed).alias("__net")).where("__net != 0")
    kind = F.when(F.col("__net") > 0, F.lit(int(RowKind.INSERT))).otherwise(F.lit(int(RowKind.DELETE)))
    copies = F.explode(F.array_repeat(kind.cast("tinyint"), F.abs(F.col("__net")).cast("int")))
    return net.select(*[F.col(f"`{n}`") for n in schema.names], copies.alias(KIND)).orderBy(*schema.names)


def _typed_columns(schema: SourceSchema) -> list:
    """The feed's columns as the stage's schema types them."""
    return [F.col(f"`{c.name}`").cast(c.spark_type).alias(c.name) for c in schema.columns]


def stage_versions(spark: SparkSession, table: Path, stager: SparkFeedStager) -> None:
    """Run the feed's streaming query until every committed version is staged (availableNow:
    a backlog of many versions is read in several micro-batches, not at once)."""
    feed = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", stager.manifest["next_version"])
        .load(str(table))
    )
    scratch = stager.spark_directory / FEED_CHECKPOINT
    remove_tree(scratch)
    query = (
        feed.writeStream.trigger(availableNow=True)
        .queryName(f"lockstep_feed_{stager.manifest['source']}")
        .option("checkpointLocation", str(scratch))
        .foreachBatch(stager)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        remove_tree(scratch)
