"""The spark engine's stateful operators: each key's live rows in Spark's keyed state, on the
executors.

LiveRows (jobs/stream/jvm/lockstep/stream/LiveRows.java) is a transformWithState processor. For
each key of the operator (a deduplication's partition key, a join key, an aggregate's group
key) it keeps a map of row -> live copies in the RocksDB state store: partitioned by the key
across the executors, checkpointed with the streaming query, so a failed task or a restarted
query starts again from the last committed micro-batch. For every key a micro-batch touches it
emits the key's live rows before the micro-batch (phase 0) and the micro-batch's net change of
each row (phase 1), and keeps the rows after it.

foreachBatch then has `before` and `after` of the touched keys as frames on the executors, and
the operator's own function (operators/: TopRows, JoinedRows, GroupedRows, shared with the local
engine) makes their difference there. Nothing here brings a row to the driver.

The state is a multiset of rows per key, as Flink's operators keep theirs (a deduplication's
rows of a partition, a join side's rows of a key with their counts, a MIN/MAX aggregate's values
of a group); what differs is that the operator's result is recomputed from the key's rows by
Spark's batch operator, the same one the batch job runs, instead of being kept incrementally.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, MapType, StructType

from jobs.changelog.columns import COUNT, WEIGHT
from jobs.runtime.session_conf import settings_for
from jobs.runtime.stream_jar import require_stream_jar

PHASE, COPIES = "__phase", "__w"  # LiveRows' output columns

# A broadcast join collects its smaller side on the driver first: a MERGE's changes, a touched
# key's rows. Measured with the listener below, that was the only part of a micro-batch's task
# results that grew with the data (tests/integration/test_spark_engine.py).
BROADCAST_THRESHOLDS = ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.autoBroadcastJoinThreshold")

BEFORE = 0  # LiveRows.BEFORE: a live row before the micro-batch (1: the micro-batch's change)


def rows_stay_on_executors(spark: SparkSession) -> AbstractContextManager[None]:
    """Run the block (a stage's streaming query) without broadcast joins."""
    return settings_for(spark, dict.fromkeys(BROADCAST_THRESHOLDS, "-1"))


class LiveRowsState:
    """One operator's LiveRows: the change stream keyed and folded into the state, and each
    micro-batch's output split back into the touched keys' rows before and after it."""

    def __init__(self, values: tuple[str, ...]):
        self.values = values
        self._values = [F.col(f"`{v}`") for v in values]
        before = F.sum(F.when(F.col(PHASE) == BEFORE, F.col(COPIES)).otherwise(F.lit(0)))
        self._counts = [before.alias("__before"), F.sum(COPIES).alias("__after")]

    def stream(self, spark: SparkSession, changes: DataFrame, keys: list[Column]) -> DataFrame:
        """The streaming frame of LiveRows' output over `changes` (the values and their WEIGHT)
        grouped by `keys` (at least one: a constant for a single group)."""
        require_stream_jar(spark, "stream.engine: spark")
        names = [f"__key{i}" for i in range(len(keys))]
        keyed = changes.select(
            *[key.alias(name) for key, name in zip(keys, names)],
            *self._values,
            F.col(WEIGHT).cast("bigint").alias(COPIES),
        )
        keyed = keyed.select(
            *[as_state_key(F.col(name), keyed.schema[name].dataType).alias(name) for name in names],
            *self._values,
            COPIES,
        )
        jvm: Any = spark._jvm
        return DataFrame(jvm.lockstep.stream.LiveRows.apply(keyed._jdf, len(keys)), spark)

    def before_after(self, live: DataFrame) -> tuple[DataFrame, DataFrame]:
        """The touched keys' live rows before and after the micro-batch, each row with its
        copies as COUNT. Summed as Spark groups (-0.0 with 0.0, NULLs together), which the
        state's map of encoded rows does not."""
        counted = live.groupBy(*self._values).agg(*self._counts)
        before = counted.where(F.col("__before") > 0).select(*self._values, F.col("__before").alias(COUNT))
        after = counted.where(F.col("__after") > 0).select(*self._values, F.col("__after").alias(COUNT))
        return before, after


def as_state_key(key: Column, key_type: DataType) -> Column:
    """A key as the state groups it: its encoded bytes. Spark's batch operators take -0.0 for 0.0
    and every NaN for one NaN, so floating keys are made so first (both land in one state key);
    a nested key, which may hold floating values, becomes one constant key."""
    if isinstance(key_type, (FloatType, DoubleType)):
        return (
            F.when(F.isnan(key), F.lit(float("nan")).cast(key_type))
            .when(key == 0, F.lit(0).cast(key_type))
            .otherwise(key)
        )
    if isinstance(key_type, (StructType, ArrayType, MapType)):
        return F.lit(0)
    return key
