"""Deduplication and joins over changelogs: recompute the touched keys, emit the difference.

Spark's streaming deduplication and stream-stream joins take append-only input, so they cannot
retract. Here each micro-batch is handled as a change to a keyed function of the live input:

    touched  = the keys (partition key / join key) the micro-batch's changes carry
    before   = f(live rows of the touched keys)          e.g. ROW_NUMBER() = 1, or a LEFT JOIN
    after    = f(live rows of the touched keys + changes)
    output   = after - before, as weighted rows (+n added, -n retracted)

f is Spark's own batch operator, so the stream applies exactly the semantics the batch side
does, and outer joins get their null-padded rows added and retracted for free (a padded row is
in `before` and not in `after` when the first match arrives). Rows of untouched keys cannot
change, so they are never read.

State is each input's live rows (live_state.py): a compacted snapshot plus short logs of net
changes, so a micro-batch reads the state, not the history, and a replayed one reads what it read
the first time.

Only f and the difference run in Spark. The micro-batch's change rows come to the driver in one
Spark job; there they are summed into net changes, the touched keys' live rows are read from the
state by Arrow, and `after` is summed from the two (row_counts.py, grouping exactly as Spark
groups); `before` and `after` go back to Spark as local frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, WEIGHT, WINDOW_END, WINDOW_START
from jobs.changelog.schema import all_nullable
from jobs.plan.nodes import AggCall, Deduplicate, GroupAggregate, Join, SessionAggregate
from jobs.plan.to_sql import join_condition_sql
from jobs.stream.driver_input import DriverInput
from jobs.stream.join_rows import joined, joins_on_driver
from jobs.stream.live_state import LiveState
from jobs.stream.row_counts import difference, live_rows, net_rows
from jobs.stream.top_rows import ranks_on_driver, top_rows

# Each Column below is built once per operator and reused by every micro-batch: building one is a
# round trip to the JVM, and a micro-batch of a few rows spent more time building its plan
# (about 150 ms for a deduplication) than running it.


class NetChanges:
    """The micro-batch's rows of `columns`, each with its weight as COUNT, brought to the driver
    by one Spark job; there, per distinct row, the sum of its weights."""

    def __init__(self, columns: tuple[str, ...]):
        self._selected = [*_cols(columns), F.col(WEIGHT).cast("bigint").alias(COUNT)]

    def rows(self, delta: DataFrame) -> pa.Table:
        """Every change row, its weight as COUNT (not summed)."""
        return delta.select(*self._selected).toArrow()

    def __call__(self, delta: DataFrame) -> pa.Table:
        return net_rows(self.rows(delta))


class Expand:
    """Each row as many times as its count: what the batch operator sees."""

    def __init__(self, columns: tuple[str, ...]):
        self._copies = F.explode(F.sequence(F.lit(1), F.col(COUNT)))
        self._columns = _cols(columns)

    def __call__(self, rows: DataFrame) -> DataFrame:
        return rows.withColumn("__copy", self._copies).select(*self._columns)


class Difference:
    """after - before as weighted rows: weight +n for rows added, -n for rows retracted."""

    def __init__(self, columns: tuple[str, ...]):
        self._rows = _cols(columns)
        self._added, self._retracted = [*self._rows, F.lit(1).alias(WEIGHT)], [*self._rows, F.lit(-1).alias(WEIGHT)]
        self._weight = F.sum(WEIGHT).cast("int").alias(WEIGHT)
        self._changed = F.col(WEIGHT) != 0

    def __call__(self, after: DataFrame, before: DataFrame) -> DataFrame:
        both = after.select(*self._added).unionByName(before.select(*self._retracted))
        return both.groupBy(*self._rows).agg(self._weight).where(self._changed)


def _cols(names: tuple[str, ...]) -> list[Column]:
    return [F.col(f"`{n}`") for n in names]


class TopRows:
    """What a deduplication or a Top-N makes of a key's rows (a frame of rows and their COUNT):
    the first `limit` rows of each partition, ranked by ROW_NUMBER() <= limit per key, ties broken
    by the other columns (as the batch SQL of the stage); every copy of a duplicated row ranks on
    its own, as in the batch. The same for both engines: only where the rows come from differs."""

    def __init__(self, node: Deduplicate):
        self.node = node
        self._expand = Expand(node.input.output_names) if node.is_top_n else None
        ordering = [F.col(f"`{c}`").desc() if node.descending else F.col(f"`{c}`").asc() for c in node.ordering]
        self._rank = F.row_number().over(Window.partitionBy(*_cols(node.keys)).orderBy(*ordering))
        self._ranked_in = F.col("__rn") <= node.limit
        self._selected = [*_cols(node.selected), F.col("__rn").cast("int").alias(node.row_number)]
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._top(after), self._top(before))

    def _top(self, rows: DataFrame) -> DataFrame:
        copies = self._expand(rows) if self._expand else rows
        return copies.withColumn("__rn", self._rank).where(self._ranked_in).select(*self._selected)


class DedupOperator:
    """A deduplication or a Top-N over lockstep's state: the touched partitions ranked before and
    after the micro-batch, on the driver where Arrow orders the rows as Spark does
    (top_rows.py), else by Spark's window (TopRows)."""

    def __init__(self, node: Deduplicate, state_dir: Path, direct: DriverInput | None = None):
        self.node, self.direct = node, direct
        self.state = LiveState(state_dir / "input", node.keys)
        self._net_changes = NetChanges(node.input.output_names)
        self._ranking = TopRows(node)

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table | DataFrame:
        """The difference as weighted rows: an Arrow table when ranked on the driver. The
        change rows are `delta`'s, or the `segments` files' when `direct` reads them."""
        net = _read_on_driver(self.direct, segments)
        if net is None:
            net = self._net_changes(delta)
        before = self.state.rows_before(batch_id, net, net.schema)
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        if ranks_on_driver(self.node, before, after):
            return difference(top_rows(after, self.node), top_rows(before, self.node))
        return self._ranking.difference(self.state.frame(spark, after), self.state.frame(spark, before))


SIDE, LEFT, RIGHT = "__side", "__left", "__right"
_HOW = {"inner": "inner", "left": "left", "right": "right", "full": "full", "semi": "left_semi", "anti": "left_anti"}


class JoinedRows:
    """What a regular join makes of a key's rows of both sides (frames of rows and their COUNT),
    by Spark's join, the same for both engines."""

    def __init__(self, node: Join):
        self.node = node
        self._expand_left, self._expand_right = Expand(node.left.output_names), Expand(node.right.output_names)
        on = reduce(
            lambda a, b: a & b,
            [F.col(f"l.`{a}`") == F.col(f"r.`{b}`") for a, b in zip(node.left_keys, node.right_keys)],
            F.lit(True),
        )
        condition = join_condition_sql(node)
        self._on = on if condition is None else on & F.expr(condition)
        right = [] if node.filters_left else [F.col(f"r.`{c}`").alias(c) for c in node.right.output_names]
        self._selected = [*[F.col(f"l.`{c}`").alias(c) for c in node.left.output_names], *right]
        self._difference = Difference(node.output)

    def difference(self, after: tuple[DataFrame, DataFrame], before: tuple[DataFrame, DataFrame]) -> DataFrame:
        """after - before, each a (left rows, right rows) pair."""
        return self._difference(self._join(*after), self._join(*before))

    def _join(self, left: DataFrame, right: DataFrame) -> DataFrame:
        sides = self._expand_left(left).alias("l"), self._expand_right(right).alias("r")
        return sides[0].join(sides[1], self._on, _HOW[self.node.kind]).select(*self._selected)


class JoinOperator:
    """A regular join over lockstep's state: the touched keys' rows of both sides joined before
    and after the micro-batch, on the driver where Arrow joins as Spark does (join_rows.py), else
    by Spark (JoinedRows)."""

    def __init__(self, node: Join, state_dir: Path, direct: tuple[DriverInput, DriverInput] | None = None):
        self.node, self.direct = node, direct
        self.left_cols, self.right_cols = node.left.output_names, node.right.output_names
        self.left_state = LiveState(state_dir / "left", node.left_keys)
        self.right_state = LiveState(state_dir / "right", node.right_keys)
        self._net_changes = NetChanges((SIDE, LEFT, RIGHT))
        self._joined = JoinedRows(node)

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table | DataFrame:
        """The difference as weighted rows: an Arrow table when joined on the driver. The
        change rows are `delta`'s, or the `segments` files' when `direct` reads both sides."""
        node = self.node
        sides = _read_both_on_driver(self.direct, segments)
        if sides is not None:
            left_net, right_net = sides
        else:
            left_net, right_net = per_side(self._net_changes.rows(delta), self.left_cols, self.right_cols)
        # A key is touched when either side's changes carry it: both sides' rows of it are read.
        left_touched = _touched(left_net, node.left_keys, right_net, node.right_keys)
        right_touched = _touched(right_net, node.right_keys, left_net, node.left_keys)
        left_before = self.left_state.rows_before(batch_id, left_touched, left_net.schema)
        right_before = self.right_state.rows_before(batch_id, right_touched, right_net.schema)
        left_after = live_rows(pa.concat_tables([left_before, left_net]))
        right_after = live_rows(pa.concat_tables([right_before, right_net]))
        self.left_state.record(left_net, batch_id)
        self.right_state.record(right_net, batch_id)
        if joins_on_driver(node, left_net.schema, right_net.schema):
            return difference(joined(node, left_after, right_after), joined(node, left_before, right_before))
        left, right = self.left_state, self.right_state
        return self._joined.difference(
            (left.frame(spark, left_after), right.frame(spark, right_after)),
            (left.frame(spark, left_before), right.frame(spark, right_before)),
        )


def _read_on_driver(direct: DriverInput | None, segments: Mapping[str, Sequence[Path]] | None) -> pa.Table | None:
    """The net changes read from the micro-batch's segment files, if `direct` can read them."""
    if direct is None or not segments:
        return None
    rows = direct.rows(segments)
    return None if rows is None else net_rows(rows)


def _read_both_on_driver(
    direct: tuple[DriverInput, DriverInput] | None, segments: Mapping[str, Sequence[Path]] | None
) -> tuple[pa.Table, pa.Table] | None:
    """Both sides' net changes, if `direct` can read each of them from the segment files."""
    if direct is None:
        return None
    left, right = (_read_on_driver(d, segments) for d in direct)
    return None if left is None or right is None else (left, right)


def _touched(own: pa.Table, own_keys: tuple[str, ...], other: pa.Table, other_keys: tuple[str, ...]) -> pa.Table | None:
    """The join keys either side's net changes carry, under this side's key names: the other
    side's keys are cast to this side's types where they cast; where they do not, they are
    left out of this side's filter, which then reads every live row of this side (a superset,
    never fewer rows than needed)."""
    mine = all_nullable(own.select(list(own_keys)))
    try:
        theirs = pa.table(
            [other.column(o).cast(own.schema.field(m).type) for m, o in zip(own_keys, other_keys)], names=list(own_keys)
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.concat_tables([mine, theirs])


def per_side(changes: pa.Table, left_cols: tuple[str, ...], right_cols: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """Both join inputs' net changes out of the tagged change rows (each side's columns packed in
    a struct, so that the two streams could be unioned), which one Spark job brought back."""
    return _one_side(changes, LEFT, left_cols), _one_side(changes, RIGHT, right_cols)


def _one_side(changes: pa.Table, side: str, columns: tuple[str, ...]) -> pa.Table:
    """One side's net changes: its struct's fields as columns, summed with the count."""
    rows = changes.filter(pc.equal(changes.column(SIDE), side))
    fields = rows.column(side).combine_chunks().flatten()
    return net_rows(pa.table([*fields, rows.column(COUNT).combine_chunks()], names=[*columns, COUNT]))


def tag_side(frame: DataFrame, side: str, columns: tuple[str, ...], other: str, other_ddl: str) -> DataFrame:
    """A join input's rows in the shape both sides share, so the two streams can be unioned."""
    mine = F.struct(*[F.col(f"`{c}`") for c in columns]).alias(side)
    empty = F.lit(None).cast(f"struct<{other_ddl}>").alias(other)
    parts = {side: mine, other: empty}
    return frame.select(F.lit(side).alias(SIDE), parts[LEFT], parts[RIGHT], F.col(WEIGHT))


class GroupedRows:
    """What a group aggregate makes of its groups' rows (a frame of `columns` and their COUNT):
    Spark's batch aggregation, one row per group with rows (without GROUP BY one row, as in
    batch SQL)."""

    def __init__(self, node: GroupAggregate, columns: tuple[str, ...]):
        self._expand = Expand(columns)
        self._keys = _cols(node.group_keys)
        # GROUP BY without an aggregate call (SELECT DISTINCT-like) still aggregates something.
        self._aggregates = [_aggregate(call) for call in node.aggregates] or [F.count(F.lit(1)).alias("__rows")]
        self._output = _cols(node.output_names)
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._groups(after), self._groups(before))

    def _groups(self, rows: DataFrame) -> DataFrame:
        return self._expand(rows).groupBy(*self._keys).agg(*self._aggregates).select(*self._output)


class SessionRows:
    """What session windows make of a key's rows (a frame of rows and their COUNT): its sessions
    by Spark's own session_window, so sessions grow, merge, shrink and split as in the batch
    result. The same for both engines."""

    def __init__(self, node: SessionAggregate):
        self._expand = Expand(node.input.output_names)
        self._session = F.session_window(F.col(f"`{node.window.time_col}`"), node.window.size_sql).alias("__session")
        self._keys = _cols(node.group_keys)
        self._aggregates = [_aggregate(call) for call in node.aggregates]
        self._selected = [
            F.col("__session.start").alias(WINDOW_START),
            F.col("__session.end").alias(WINDOW_END),
            *self._keys,
            *_cols(tuple(call.name for call in node.aggregates)),
        ]
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._sessions(after), self._sessions(before))

    def _sessions(self, rows: DataFrame) -> DataFrame:
        grouped = self._expand(rows).groupBy(self._session, *self._keys).agg(*self._aggregates)
        return grouped.select(*self._selected)


class SessionOperator:
    """Session windows over lockstep's state: each touched key's sessions from its live rows,
    before and after the micro-batch (SessionRows)."""

    def __init__(self, node: SessionAggregate, state_dir: Path):
        self.node = node
        self.state = LiveState(state_dir / "input", node.group_keys)
        self._net_changes = NetChanges(node.input.output_names)
        self._sessions = SessionRows(node)

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        net = self._net_changes(delta)
        # No group keys: one key, every session.
        before = self.state.rows_before(batch_id, net if self.node.group_keys else None, net.schema)
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        return self._sessions.difference(self.state.frame(spark, after), self.state.frame(spark, before))


def _aggregate(call: AggCall) -> Column:
    """One aggregate call as Spark computes it in batch."""
    if call.arg is None:
        return F.count(F.lit(1)).alias(call.name)
    arg = F.col(f"`{call.arg}`")
    if call.distinct:
        function = {"COUNT": F.count_distinct, "SUM": F.sum_distinct}.get(call.func)
        if function is not None:
            return function(arg).alias(call.name)
    return {"SUM": F.sum, "COUNT": F.count, "AVG": F.avg, "MIN": F.min, "MAX": F.max}[call.func](arg).alias(call.name)
