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
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, MapType, StructType, TimestampNTZType

from jobs.changelog.columns import COUNT, SEQ, WATERMARK, WEIGHT
from jobs.runtime.session_conf import settings_for
from jobs.runtime.stream_jar import require_stream_jar

PHASE, COPIES = "__phase", "__w"  # LiveRows' output columns

# A broadcast join collects its smaller side on the driver first: a MERGE's changes, a touched
# key's rows. Measured with the listener below, that was the only part of a micro-batch's task
# results that grew with the data (tests/integration/test_spark_engine.py).
BROADCAST_THRESHOLDS = ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.autoBroadcastJoinThreshold")

BEFORE = 0  # LiveRows.BEFORE: a live row before the micro-batch (1: the micro-batch's change)
LATE = 2  # LiveRows.LATE: a session window's change left out as late (SessionLateness.java)


# With a watermark (watermarked), Spark would run a micro-batch without input
# whenever the watermark moves, only to fire timers: the next micro-batch fires them as well.
NO_EMPTY_BATCHES = {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}


def rows_stay_on_executors(spark: SparkSession) -> AbstractContextManager[None]:
    """Run the block (a stage's streaming query) without broadcast joins, and without
    micro-batches that read nothing."""
    return settings_for(spark, {**dict.fromkeys(BROADCAST_THRESHOLDS, "-1"), **NO_EMPTY_BATCHES})


@dataclass(frozen=True)
class RowExpiry:
    """When a row leaves the state (StateExpiry.java): `expires`, microseconds, once the watermark
    reaches it (NULL: never); `order`, for a versioned table's rows only, the version's order
    after its time (the latest version at or before the watermark stays)."""

    expires: Column
    order: Column | None = None

    def columns(self) -> list[Column]:
        order = [] if self.order is None else [self.order.cast("bigint").alias(ORDER)]
        return [self.expires.cast("bigint").alias(EXPIRES), *order]


EXPIRES, ORDER = "__expires", "__order"  # RowExpiry's columns in LiveRows' value


class LiveRowsState:
    """One operator's LiveRows: the change stream keyed and folded into the state, and each
    micro-batch's output split back into the touched keys' rows before and after it."""

    def __init__(self, values: tuple[str, ...]):
        self.values = values
        self._values = [F.col(f"`{v}`") for v in values]
        before = F.sum(F.when(F.col(PHASE) == BEFORE, F.col(COPIES)).otherwise(F.lit(0)))
        self._counts = [before.alias("__before"), F.sum(COPIES).alias("__after")]
        self._kept = self._values  # LiveRows' value columns: with an expiry, its columns too

    def stream(
        self,
        spark: SparkSession,
        changes: DataFrame,
        keys: list[Column],
        session: SessionGap | None = None,
        expiry: RowExpiry | None = None,
    ) -> DataFrame:
        """The streaming frame of LiveRows' output over `changes` (the values and their WEIGHT)
        grouped by `keys` (at least one: a constant for a single group). With `session`, the
        changes also carry WATERMARK and SEQ, and the late ones come out as LATE. With `expiry`,
        `changes` carries Spark's watermark (watermarked) and rows leave the state
        as it passes them."""
        require_stream_jar(spark, "stream.engine: spark")
        names = [f"__key{i}" for i in range(len(keys))]
        extra = [] if session is None else [_micros(changes, WATERMARK).alias(WATERMARK), F.col(SEQ)]
        expiring = [] if expiry is None else expiry.columns()
        keyed = changes.select(
            *[key.alias(name) for key, name in zip(keys, names)],
            *self._values,
            *expiring,
            *extra,
            F.col(WEIGHT).cast("bigint").alias(COPIES),
        )
        self._kept = [*self._values, *[F.col(c) for c in (EXPIRES, ORDER) if c in keyed.columns]]
        keyed = keyed.select(
            *[as_state_key(F.col(name), keyed.schema[name].dataType).alias(name) for name in names],
            *self._kept,
            *[WATERMARK, SEQ][: len(extra)],
            COPIES,
        )
        live_rows: Any = spark._jvm.lockstep.stream.LiveRows  # type: ignore[union-attr]
        if expiry is not None:
            order = len(self.values) + 1 if expiry.order is not None else -1
            return DataFrame(live_rows.applyExpiring(keyed._jdf, len(keys), len(self.values), order), spark)
        if session is None:
            return DataFrame(live_rows.apply(keyed._jdf, len(keys)), spark)
        time_index = self.values.index(session.time_col)
        return DataFrame(live_rows.applyToSessions(keyed._jdf, len(keys), time_index, session.gap_micros), spark)

    def before_after(self, live: DataFrame) -> tuple[DataFrame, DataFrame]:
        """The touched keys' live rows before and after the micro-batch, each row with its
        copies as COUNT. Summed as Spark groups (-0.0 with 0.0, NULLs together), which the
        state's map of encoded rows does not."""
        counted = live.where(F.col(PHASE) != LATE).groupBy(*self._kept).agg(*self._counts)
        before = counted.where(F.col("__before") > 0).select(*self._values, F.col("__before").alias(COUNT))
        after = counted.where(F.col("__after") > 0).select(*self._values, F.col("__after").alias(COUNT))
        return before, after


@dataclass(frozen=True)
class SessionGap:
    """A session window's event time (one of the values) and gap: LiveRows judges lateness."""

    time_col: str
    gap_micros: int


def _micros(changes: DataFrame, column: str) -> Column:
    return event_micros(F.col(f"`{column}`"), changes.schema[column].dataType)


def event_micros(time: Column, time_type: DataType) -> Column:
    """A timestamp as microseconds since the epoch; one without a zone read as UTC, as
    SessionLateness.java and the staged segments' watermarks read the event times."""
    if isinstance(time_type, TimestampNTZType):
        return F.timestamp_diff("MICROSECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), time)
    return F.unix_micros(time)


def watermarked(*frames: DataFrame) -> tuple[DataFrame, ...] | None:
    """The inputs, each with Spark's event-time watermark on the watermark its rows were staged
    under (WATERMARK); None when one does not carry it (then nothing tells when a row is done,
    and the operator keeps its rows). Spark's watermark, the highest seen so far and the least
    over a query's inputs, is what fires LiveRows' timers. It trails lockstep's own by up to two
    micro-batches, so a row may stay a little longer than on the local engine, never leave
    earlier."""
    if not all(WATERMARK in frame.columns for frame in frames):
        return None
    return tuple(_with_event_time_watermark(frame) for frame in frames)


def _with_event_time_watermark(frame: DataFrame) -> DataFrame:
    wm_type = frame.schema[WATERMARK].dataType
    if isinstance(wm_type, TimestampNTZType):
        frame = frame.withColumn(WATERMARK, F.timestamp_micros(event_micros(F.col(WATERMARK), wm_type)))
    return frame.withWatermark(WATERMARK, "0 seconds")


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
