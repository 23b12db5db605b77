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
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, WEIGHT, WINDOW_END, WINDOW_START
from jobs.changelog.schema import all_nullable
from jobs.plan.nodes import AggCall, Deduplicate, Join, SessionAggregate
from jobs.plan.to_sql import join_condition_sql
from jobs.stream.live_state import LiveState



def net_changes(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """Per distinct row, the sum of its weights (rows whose changes cancel out are gone)."""
    cols = [F.col(f"`{c}`") for c in columns]
    return rows.groupBy(*cols).agg(F.sum(WEIGHT).cast("bigint").alias(COUNT)).where(F.col(COUNT) != 0)


def expand(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """Each row as many times as its count: what the batch operator sees."""
    cols = [F.col(f"`{c}`") for c in columns]
    return rows.withColumn("__copy", F.explode(F.sequence(F.lit(1), F.col(COUNT)))).select(*cols)


def difference(after: DataFrame, before: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """after - before as weighted rows: weight +n for rows added, -n for rows retracted."""
    cols = [F.col(f"`{c}`") for c in columns]
    both = after.select(*cols, F.lit(1).alias(WEIGHT)).unionByName(before.select(*cols, F.lit(-1).alias(WEIGHT)))
    return both.groupBy(*cols).agg(F.sum(WEIGHT).cast("int").alias(WEIGHT)).where(F.col(WEIGHT) != 0)


class DedupOperator:
    """A deduplication or a Top-N: the first `limit` rows of each touched partition, before and
    after the micro-batch."""

    def __init__(self, node: Deduplicate, state_dir: Path, input_ddl: str):
        self.node = node
        self.columns = node.input.output_names
        self.state = LiveState(state_dir / "input", input_ddl, node.keys)

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        net, net_rows = self.state.local(spark, net_changes(delta, self.columns))
        before = self.state.live_before(spark, batch_id, net_rows, net_rows.schema)
        after = _plus(before, net, self.columns)
        self.state.record(spark, net_rows, batch_id)
        return difference(self._top(after), self._top(before), self.node.output_names)

    def _top(self, rows: DataFrame) -> DataFrame:
        """ROW_NUMBER() <= limit per key, ties broken by the other columns (as the batch SQL of
        the stage); every copy of a duplicated row ranks on its own, as in the batch."""
        ordering = [F.col(f"`{c}`").desc() if self.node.descending else F.col(f"`{c}`").asc()
                    for c in self.node.ordering]
        window = Window.partitionBy(*[F.col(f"`{k}`") for k in self.node.keys]).orderBy(*ordering)
        copies = expand(rows, self.columns) if self.node.is_top_n else rows
        ranked = copies.withColumn("__rn", F.row_number().over(window)).where(F.col("__rn") <= self.node.limit)
        return ranked.select(*[F.col(f"`{c}`") for c in self.node.selected],
                             F.col("__rn").cast("int").alias(self.node.row_number))


SIDE, LEFT, RIGHT = "__side", "__left", "__right"


class JoinOperator:
    def __init__(self, node: Join, state_dir: Path, left_ddl: str, right_ddl: str):
        self.node = node
        self.left_cols, self.right_cols = node.left.output_names, node.right.output_names
        self.left_state = LiveState(state_dir / "left", left_ddl, node.left_keys)
        self.right_state = LiveState(state_dir / "right", right_ddl, node.right_keys)

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        node = self.node
        left_rows, right_rows = net_changes_per_side(delta, self.left_cols, self.right_cols)
        left_net = self.left_state.frame(spark, left_rows)
        right_net = self.right_state.frame(spark, right_rows)
        # A key is touched when either side's changes carry it: both sides' rows of it are read.
        left_touched = _touched(left_rows, node.left_keys, right_rows, node.right_keys)
        right_touched = _touched(right_rows, node.right_keys, left_rows, node.left_keys)
        left_before = self.left_state.live_before(spark, batch_id, left_touched, left_rows.schema)
        right_before = self.right_state.live_before(spark, batch_id, right_touched, right_rows.schema)
        left_after = _plus(left_before, left_net, self.left_cols)
        right_after = _plus(right_before, right_net, self.right_cols)
        self.left_state.record(spark, left_rows, batch_id)
        self.right_state.record(spark, right_rows, batch_id)
        before = self._join(left_before, right_before)
        after = self._join(left_after, right_after)
        return difference(after, before, node.output)

    def _join(self, left: DataFrame, right: DataFrame) -> DataFrame:
        node = self.node
        l, r = expand(left, self.left_cols).alias("l"), expand(right, self.right_cols).alias("r")
        on = reduce(lambda a, b: a & b, [F.col(f"l.`{a}`") == F.col(f"r.`{b}`")
                                         for a, b in zip(node.left_keys, node.right_keys)])
        if node.condition is not None:
            on = on & F.expr(join_condition_sql(node))
        how = {"inner": "inner", "left": "left", "right": "right", "full": "full",
               "semi": "left_semi", "anti": "left_anti"}[node.kind]
        joined = l.join(r, on, how)
        right = [] if node.filters_left else [F.col(f"r.`{c}`").alias(c) for c in self.right_cols]
        return joined.select(*[F.col(f"l.`{c}`").alias(c) for c in self.left_cols], *right)


def _touched(own: pa.Table, own_keys: tuple[str, ...], other: pa.Table,
             other_keys: tuple[str, ...]) -> pa.Table | None:
    """The join keys either side's net changes carry, under this side's key names: the other
    side's keys are cast to this side's types where they cast; where they do not, they are
    left out of this side's filter, which then reads every live row of this side (a superset,
    never fewer rows than needed)."""
    mine = all_nullable(own.select(list(own_keys)))
    try:
        theirs = pa.table([other.column(o).cast(own.schema.field(m).type) for m, o in zip(own_keys, other_keys)],
                          names=list(own_keys))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.concat_tables([mine, theirs])


def net_changes_per_side(delta: DataFrame, left_cols: tuple[str, ...],
                         right_cols: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """Both join inputs' net changes from one Spark job (a job per side would cost as much again
    on a small micro-batch): the tagged rows summed per side and row, then split on the driver.
    Spark groups a struct's floating fields as it groups plain columns (-0.0 as 0.0)."""
    table = net_changes(delta, (SIDE, LEFT, RIGHT)).toArrow()
    return _one_side(table, LEFT, left_cols), _one_side(table, RIGHT, right_cols)


def _one_side(summed: pa.Table, side: str, columns: tuple[str, ...]) -> pa.Table:
    """One side's net changes out of both sides' sums: its struct's fields as columns, and the count."""
    rows = summed.filter(pc.equal(summed.column(SIDE), side))
    fields = rows.column(side).combine_chunks().flatten()
    return pa.table([*fields, rows.column(COUNT).combine_chunks()], names=[*columns, COUNT])


def _plus(before: DataFrame, net: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    cols = [F.col(f"`{c}`") for c in columns]
    return before.unionByName(net).groupBy(*cols).agg(F.sum(COUNT).alias(COUNT)).where(F.col(COUNT) > 0)


def tag_side(frame: DataFrame, side: str, columns: tuple[str, ...], other: str, other_ddl: str) -> DataFrame:
    """A join input's rows in the shape both sides share, so the two streams can be unioned."""
    mine = F.struct(*[F.col(f"`{c}`") for c in columns]).alias(side)
    empty = F.lit(None).cast(f"struct<{other_ddl}>").alias(other)
    parts = {side: mine, other: empty}
    return frame.select(F.lit(side).alias(SIDE), parts[LEFT], parts[RIGHT], F.col(WEIGHT))


class SessionOperator:
    """Session windows: each touched key's sessions from its live rows, before and after the
    micro-batch, by Spark's own session_window, so sessions grow, merge, shrink and split as in
    the batch result."""

    def __init__(self, node: SessionAggregate, state_dir: Path, input_ddl: str):
        self.node = node
        self.columns = node.input.output_names
        self.state = LiveState(state_dir / "input", input_ddl, node.group_keys)

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        net, net_rows = self.state.local(spark, net_changes(delta, self.columns))
        # No group keys: one key, every session.
        before = self.state.live_before(spark, batch_id, net_rows if self.node.group_keys else None, net_rows.schema)
        after = _plus(before, net, self.columns)
        self.state.record(spark, net_rows, batch_id)
        return difference(self._sessions(after), self._sessions(before), self.node.output_names)

    def _sessions(self, rows: DataFrame) -> DataFrame:
        node = self.node
        window = F.session_window(F.col(f"`{node.window.time_col}`"), node.window.size_sql).alias("__session")
        keys = [F.col(f"`{k}`") for k in node.group_keys]
        grouped = expand(rows, self.columns).groupBy(window, *keys).agg(*[_aggregate(call) for call in node.aggregates])
        return grouped.select(F.col("__session.start").alias(WINDOW_START), F.col("__session.end").alias(WINDOW_END),
                              *keys, *[F.col(f"`{call.name}`") for call in node.aggregates])


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
