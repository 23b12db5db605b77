"""A regular join's rows before and after a micro-batch, computed on the driver.

The touched keys' live rows of both inputs are on the driver already (operators/). Joining them
there with Arrow, rather than sending both sides twice to Spark for two shuffled joins and a
difference aggregation, leaves Spark only the difference. A live row stands for its count of
copies, so a joined row stands for the product of its two rows' counts (a null-padded or semi /
anti join row for its own row's count): no row is expanded into copies.

The join must be Spark's: an equality of keys of one type on both sides, where a null never
matches (Arrow's hash join, as SQL's `=`), and no extra condition. Keys of different types
(Spark would cast one side), floating keys (NaN matches NaN in Spark's join) and nested keys are
joined by Spark (operators/), as is a join with an extra condition.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT
from jobs.plan.nodes import Join
from jobs.stream.state.row_counts import compares_as_spark

_ARROW_KIND = {
    "inner": "inner",
    "left": "left outer",
    "right": "right outer",
    "full": "full outer",
    "semi": "left semi",
    "anti": "left anti",
}
_LEFT_COUNT, _RIGHT_COUNT = "__left_count", "__right_count"


def joins_on_driver(node: Join, left: pa.Schema, right: pa.Schema) -> bool:
    """Whether joined() computes what Spark's join of these inputs would: equalities only, on
    keys of one type on both sides (Spark would cast one side) that Arrow equates as Spark does."""
    pairs = [(left.field(a).type, right.field(b).type) for a, b in zip(node.left_keys, node.right_keys)]
    return node.condition is None and bool(pairs) and all(a == b and compares_as_spark(a) for a, b in pairs)


def joined(node: Join, left: pa.Table, right: pa.Table) -> pa.Table:
    """The join of two sides' live rows (their columns and COUNT): node.output's columns and
    COUNT, the number of copies of each output row."""
    lefts = _positional(left, "l", _LEFT_COUNT)
    rights = _positional(right, "r", _RIGHT_COUNT)
    result = lefts.join(
        rights,
        keys=[_name("l", left, k) for k in node.left_keys],
        right_keys=[_name("r", right, k) for k in node.right_keys],
        join_type=_ARROW_KIND[node.kind],
        coalesce_keys=False,
        use_threads=False,
    )
    columns = [_name("l", left, c) for c in left.column_names if c != COUNT]
    count = pc.fill_null(result.column(_LEFT_COUNT), 1)
    if not node.filters_left:
        columns += [_name("r", right, c) for c in right.column_names if c != COUNT]
        count = pc.multiply(count, pc.fill_null(result.column(_RIGHT_COUNT), 1))
    return pa.table([*[result.column(c) for c in columns], count], names=[*node.output, COUNT])


def _positional(rows: pa.Table, side: str, count: str) -> pa.Table:
    """The side's columns named by position (the two sides may share names), its COUNT as `count`."""
    names = [count if c == COUNT else _name(side, rows, c) for c in rows.column_names]
    return rows.rename_columns(names)


def _name(side: str, rows: pa.Table, column: str) -> str:
    return f"__{side}{rows.column_names.index(column)}"
