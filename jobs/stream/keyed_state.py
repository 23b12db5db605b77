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
the operator's own function (keyed.py: TopRows, JoinedRows, GroupedRows, shared with the local
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
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, MapType, NumericType, StructType

from jobs.changelog.columns import COUNT, WEIGHT
from jobs.plan import StagePlan
from jobs.plan.nodes import Deduplicate, GroupAggregate, Join, SessionAggregate
from jobs.runtime.session_conf import settings_for
from jobs.runtime.stream_jar import require_stream_jar
from jobs.stream.keyed import LEFT, RIGHT, SIDE, GroupedRows, JoinedRows, SessionRows, TopRows

PHASE, COPIES = "__phase", "__w"  # LiveRows' output columns
# A broadcast join collects its smaller side on the driver first: a MERGE's changes, a touched
# key's rows. Measured with the listener below, that was the only part of a micro-batch's task
# results that grew with the data (tests/integration/test_spark_engine.py).
BROADCAST_THRESHOLDS = ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.autoBroadcastJoinThreshold")
BEFORE = 0  # LiveRows.BEFORE: a live row before the micro-batch (1: the micro-batch's change)


def groups_recomputed(stage: StagePlan, engine: str) -> bool:
    """Whether the stage's aggregate keeps its groups' rows in the keyed state (GroupsOnKeyedState)
    rather than sums in Spark's streaming aggregation, which emits groups, not a difference: for
    MIN / MAX / DISTINCT, and behind the upsert materializer."""
    aggregate = stage.aggregate
    if engine != "spark" or aggregate is None:
        return False
    return stage.materialize or not all(call.invertible for call in aggregate.aggregates)


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
            *[_as_state_key(F.col(name), keyed.schema[name].dataType).alias(name) for name in names],
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


class DedupOnKeyedState:
    """A deduplication or a Top-N: each partition's live rows in the keyed state."""

    def __init__(self, node: Deduplicate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._ranking = TopRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        return self.state.stream(spark, changes, [F.col(f"`{k}`") for k in self.node.keys] or [F.lit(0)])

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._ranking.difference(after, before)


class GroupsOnKeyedState:
    """A group aggregate with MIN, MAX or DISTINCT (which a retraction cannot subtract): each
    group's live values in the keyed state, the group recomputed when touched."""

    def __init__(self, node: GroupAggregate):
        self.node = node
        read = [c.arg for c in node.aggregates if c.arg is not None and c.arg not in node.group_keys]
        self.state = LiveRowsState(tuple(dict.fromkeys([*node.group_keys, *read])))
        self._groups = GroupedRows(node, self.state.values)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.group_keys] or [F.lit(0)]  # no GROUP BY: one group
        return self.state.stream(spark, changes, keys)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._groups.difference(after, before)


class JoinOnKeyedState:
    """A regular join: each join key's rows of both sides in one keyed state, so a change on
    either side finds the other side's rows of its key."""

    def __init__(self, node: Join, left_types: dict[str, DataType], right_types: dict[str, DataType]):
        self.node = node
        self.state = LiveRowsState((SIDE, LEFT, RIGHT))
        self._keys = [
            _join_key(left, right, left_types[left], right_types[right])
            for left, right in zip(node.left_keys, node.right_keys)
        ]
        self._joined = JoinedRows(node)

    def stream(self, spark: SparkSession, tagged: DataFrame) -> DataFrame:
        """The state over both sides' changes, tagged (keyed.tag_side) and unioned."""
        return self.state.stream(spark, tagged, self._keys or [F.lit(0)])

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._joined.difference(_sides(after), _sides(before))


class SessionsOnKeyedState:
    """Session windows: each key's live rows in the keyed state, its sessions formed again when
    touched."""

    def __init__(self, node: SessionAggregate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._sessions = SessionRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.group_keys] or [F.lit(0)]  # no keys: one key, every session
        return self.state.stream(spark, changes, keys)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._sessions.difference(after, before)


KeyedStateOperator = DedupOnKeyedState | GroupsOnKeyedState | JoinOnKeyedState | SessionsOnKeyedState


def _join_key(left: str, right: str, left_type: DataType, right_type: DataType) -> Column:
    """One join key column for both sides' rows. Keys that join must land in one state key; two
    that do not may share one (the join is recomputed on the key's rows). Numbers of two types
    are compared as doubles, which may only put more rows together; keys of unlike other types
    share one constant key."""
    left_col, right_col = F.col(LEFT).getField(left), F.col(RIGHT).getField(right)
    if left_type == right_type:
        value = F.when(F.col(SIDE) == LEFT, left_col).otherwise(right_col)
    elif isinstance(left_type, NumericType) and isinstance(right_type, NumericType):
        value = F.when(F.col(SIDE) == LEFT, left_col.cast("double")).otherwise(right_col.cast("double"))
    else:
        value = F.lit(0)
    return value


def _as_state_key(key: Column, key_type: DataType) -> Column:
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


def _sides(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(left rows, right rows), each side's struct as its columns, with COUNT."""
    side = F.col(SIDE)
    left = rows.where(side == LEFT).select(f"{LEFT}.*", COUNT)
    right = rows.where(side == RIGHT).select(f"{RIGHT}.*", COUNT)
    return left, right
