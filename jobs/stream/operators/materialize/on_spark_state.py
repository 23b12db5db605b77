"""The upsert materializer on the spark engine: each sink key's live rows as a Delta table, read,
changed and written by Spark on the executors.

The semantics are the local materializer's (on_lockstep_state.py, Flink's SinkUpsertMaterializer): a
sink key keeps the rows it has alive in the order they were added; a retraction removes the most
recently added identical row; the key's value is the most recently added row still alive, and a
key with none is deleted. Here a micro-batch's input is an operator's difference, which has no
order of its own: retractions are applied before additions (a retraction never follows the row
that replaces it), as the local engine orders them.

The table holds one row per live copy: the sink's columns plus ORDINAL, the copy's place in its
key's order (the micro-batch id in the high 32 bits, then the copy's rank among the micro-batch's
additions to its key). Per micro-batch:

    touched = the sink keys its changes carry
    before  = the table's rows of the touched keys (at the version the micro-batch started from)
    gone    = per identical row retracted n times, its n highest ordinals
    after   = before - gone + the additions
    output  = per touched key, the highest ordinal of `after` (an upsert), or a delete

The sink is written first, then the table's changes (`gone` deleted, additions inserted) under
the micro-batch's own Delta transaction: a micro-batch replayed after a crash between the two finds
the table as it was, computes the same output (which the sink skips) and writes the table once.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from jobs.changelog.columns import DELETE, OP, ORDINAL, UPSERT, WEIGHT
from jobs.runtime.delta import table_version
from jobs.stream.operators.weighted_rows import cols
from jobs.stream.writers import Changes
from jobs.stream.writers.delta_spark import DeltaSparkWriter

BATCH_SHIFT = 2**32  # an addition's ORDINAL: micro-batch id * BATCH_SHIFT + its rank in the micro-batch


class MaterializedRows:
    """One stage's materializer table (`path`), keyed by the sink key."""

    def __init__(self, spark: SparkSession, path: Path, key: tuple[str, ...], output: StructType, app_id: str):
        self.spark, self.path, self.key = spark, path, key
        self.names = tuple(f.name for f in output.fields)
        self._table = DeltaSparkWriter(spark, path, (*key, ORDINAL), f"{app_id}-materializer")
        if not self._table.exists():
            schema = StructType([*output.fields, StructField(ORDINAL, LongType())])
            self._table.create(pa.Table.from_pylist([], to_arrow_schema(schema)), "lockstep upsert materializer")
        self._pending: DataFrame | None = None  # the table's changes, written once the sink commits

    def apply(self, typed: DataFrame, batch_id: int) -> DataFrame:
        """`typed`: the sink's columns and WEIGHT (copies gained or lost). Returns one row per
        touched sink key, its newest live row tagged upsert, or the key tagged delete."""
        copies = typed.withColumn(WEIGHT, F.explode(F.array_repeat(F.signum(WEIGHT), F.abs(WEIGHT).cast("int"))))
        touched = copies.select(*cols(self.key)).distinct()
        version = table_version(self.path)
        before = self.spark.read.format("delta").option("versionAsOf", version).load(str(self.path))
        before = _joined(before, touched, self.key, "left_semi")
        gone = self._gone(before, copies.where(F.col(WEIGHT) < 0))
        added = self._added(copies.where(F.col(WEIGHT) > 0), batch_id)
        kept = _joined(before, gone, (*self.key, ORDINAL), "left_anti")
        self._pending = gone.withColumn(OP, F.lit(DELETE)).unionByName(added.withColumn(OP, F.lit(UPSERT)))
        return self._newest(kept.unionByName(added), touched)

    def after_sink_commit(self, batch_id: int) -> None:
        """Write the micro-batch's changes to the table (skipped when a replay finds them there)."""
        if self._pending is not None:
            self._table.write(Changes(frame=self._pending), batch_id, "upsert")
            self._pending = None

    def _gone(self, before: DataFrame, retractions: DataFrame) -> DataFrame:
        """The live copies the retractions remove: of each identical row, the newest ones."""
        counts = retractions.groupBy(*cols(self.names)).agg(F.count(F.lit(1)).alias("__retracted"))
        newest_first = F.row_number().over(Window.partitionBy(*cols(self.names)).orderBy(F.col(ORDINAL).desc()))
        matched = _joined(before.withColumn("__newest", newest_first), counts, self.names, "inner")
        removed = matched.where(F.col("__newest") <= F.col("__retracted"))
        return removed.select(*cols((*self.names, ORDINAL)))

    def _added(self, additions: DataFrame, batch_id: int) -> DataFrame:
        rank = F.row_number().over(Window.partitionBy(*cols(self.key)).orderBy(*cols(self.names)))
        ordinal = (F.lit(batch_id * BATCH_SHIFT).cast("bigint") + rank).alias(ORDINAL)
        return additions.select(*cols(self.names), ordinal)

    def _newest(self, after: DataFrame, touched: DataFrame) -> DataFrame:
        """Per touched key, its newest live row (upsert), else the key alone (delete)."""
        newest = F.row_number().over(Window.partitionBy(*cols(self.key)).orderBy(F.col(ORDINAL).desc()))
        upserts = after.withColumn("__newest", newest).where(F.col("__newest") == 1).select(*cols(self.names))
        deleted = _joined(touched, upserts, self.key, "left_anti")
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in after.schema.fields if f.name in self.others]
        deletes = deleted.select(*cols(self.key), *nulls).select(*cols(self.names))
        return upserts.withColumn(OP, F.lit(UPSERT)).unionByName(deletes.withColumn(OP, F.lit(DELETE)))

    @property
    def others(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n not in self.key)


def _joined(left: DataFrame, right: DataFrame, names, how: str) -> DataFrame:
    """`left` joined with `right` on equal `names`, NULL equal to NULL (a sink key may hold NULLs):
    left's columns, and for an inner join right's other columns. Right's join columns are renamed
    first: both sides often come from one table, whose columns Spark would take for one."""
    kept = right.columns if how == "inner" else list(names)
    renamed = right.select(*[F.col(f"`{c}`").alias(f"__right_{c}" if c in names else c) for c in kept])
    condition = F.lit(True)
    for name in names:
        condition = condition & F.col(f"`{name}`").eqNullSafe(F.col(f"`__right_{name}`"))
    joined = left.join(renamed, condition, how)
    return joined.drop(*[f"__right_{n}" for n in names]) if how == "inner" else joined
