"""Regular joins on the spark engine: each join key's rows of both sides in one Spark keyed state
(operators/keyed_state.py).

State that ends, as on the local engine (expiry.py, temporal.py), by the watermark: an interval
join's or a window join's row once no row still to come on the other side can match it; a
temporal join's left row once its time is reached, and a version once a later one is.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, NumericType

from jobs.changelog.columns import COUNT, SEQ
from jobs.plan.nodes import Join, TemporalJoin, TimeBounds
from jobs.plan.window_rows import state_bounds
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, SIDE, JoinedRows
from jobs.stream.operators.join.point_in_time_rows import PointInTimeRows
from jobs.stream.operators.keyed_state import LiveRowsState, RowExpiry, event_micros


class JoinOnKeyedState:
    """A regular join: each join key's rows of both sides in one keyed state, so a change on
    either side finds the other side's rows of its key. A temporal join keeps the left's rows
    and the versioned table's history (point_in_time_rows.py) the same way."""

    def __init__(
        self, node: Join, left_types: dict[str, DataType], right_types: dict[str, DataType], expiring: bool = False
    ):
        """expiring: both sides carry Spark's watermark (keyed_state.watermarked), so rows can
        leave the state as it passes them."""
        self.node = node
        self.state = LiveRowsState((SIDE, LEFT, RIGHT))
        self._keys = [
            _join_key(left, right, left_types[left], right_types[right])
            for left, right in zip(node.left_keys, node.right_keys)
        ]
        self._joined = PointInTimeRows(node) if isinstance(node, TemporalJoin) else JoinedRows(node)
        self.expiry = _expiry(node, left_types, right_types) if expiring else None

    def stream(self, spark: SparkSession, tagged: DataFrame) -> DataFrame:
        """The state over both sides' changes, tagged (joined_rows.tag_side) and unioned; with an
        expiry, each side carries Spark's watermark (keyed_state.watermarked)."""
        return self.state.stream(spark, tagged, self._keys or [F.lit(0)], expiry=self.expiry)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._joined.difference(_sides(after), _sides(before))


def _expiry(node: Join, left_types: dict[str, DataType], right_types: dict[str, DataType]) -> RowExpiry | None:
    """When a row leaves the join's state: a temporal join's left row at its time, a version when
    a later one is reached; an interval (or window) join's row when the other side's rows still
    to come are past what it can match."""
    on_left = F.col(SIDE) == LEFT
    if isinstance(node, TemporalJoin):
        times = _time(LEFT, node.left_time, left_types), _time(RIGHT, node.right_time, right_types)
        return RowExpiry(F.when(on_left, times[0]).otherwise(times[1]), F.when(~on_left, F.col(RIGHT).getField(SEQ)))
    bounds: TimeBounds | None = state_bounds(node)
    if bounds is None:
        return None
    lower, upper = (F.lit(b // timedelta(microseconds=1)) for b in (bounds.lower, bounds.upper))
    left = _time(LEFT, bounds.left_time, left_types) - lower
    return RowExpiry(F.when(on_left, left).otherwise(_time(RIGHT, bounds.right_time, right_types) + upper))


def _time(side: str, name: str, types: dict[str, DataType]) -> Column:
    return event_micros(F.col(side).getField(name), types[name])


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


def _sides(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(left rows, right rows), each side's struct as its columns, with COUNT."""
    side = F.col(SIDE)
    left = rows.where(side == LEFT).select(f"{LEFT}.*", COUNT)
    right = rows.where(side == RIGHT).select(f"{RIGHT}.*", COUNT)
    return left, right
