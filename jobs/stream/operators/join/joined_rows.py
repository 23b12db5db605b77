"""What a regular join makes of a key's rows of both sides, by Spark's join: the one function both
engines run; and the two inputs tagged into one shape, so their change streams can be unioned.
"""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, WEIGHT
from jobs.plan.nodes import Join
from jobs.plan.to_sql import join_condition_sql
from jobs.stream.operators.weighted_rows import Difference, Expand
from jobs.stream.state.row_counts import net_rows

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
