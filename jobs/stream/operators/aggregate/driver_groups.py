"""A group aggregate's touched groups finished on the driver, when their sums are there.

With lockstep's state (group_sums.py) the touched groups' sums after a micro-batch are an Arrow
table on the driver. When every aggregate is a plain SUM, COUNT or AVG of a non-decimal value,
and the SELECT above it only picks columns, the sink's rows are computed there as
aggregate.finalize computes them in Spark: COUNT(*) the group's count, COUNT(x) its non-null
count, SUM(x) its sum while that count is above zero (else NULL), AVG(x) the sum over the count in
DOUBLE; a group with no live rows left becomes a delete. Sending the groups to Spark and back was
9 of the 30 s of the race's 6 M-row group aggregate. MIN, MAX and COUNT(DISTINCT) take the
touched groups' results the value multisets computed on the driver (multiset.driver_results),
matched to the groups by key as finalize's null-safe join matches them. Anything else (SUM or
AVG DISTINCT, AVG of a DECIMAL, HAVING, an expression, a type to cast) goes to Spark as before.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DecimalType, StructType

from jobs.changelog.columns import COUNT, DELETE, OP, SLOT, UPSERT
from jobs.plan.nodes import AggCall, Calc
from jobs.stream.operators.aggregate.streaming import AggregateState, nonnull_column, sum_column
from jobs.stream.operators.driver_rows import picked_columns
from jobs.stream.state.row_counts import key_positions


def finishes_on_driver(state: AggregateState, post: Calc | None) -> bool:
    """Whether the groups' results can be made on the driver (types are checked per batch)."""
    if post is not None and post.condition is not None:
        return False
    return all(_on_driver(call, state) for call in state.node.aggregates)


def _on_driver(call: AggCall, state: AggregateState) -> bool:
    if not call.invertible:  # the value multisets' results (multiset.driver_results)
        return call.func in ("MIN", "MAX") or (call.func == "COUNT" and call.distinct)
    return call.func in ("SUM", "COUNT", "AVG") and not _decimal_average(call, state)


def finished_groups(
    groups: pa.Table,
    state: AggregateState,
    post: Calc | None,
    output: StructType,
    hidden: tuple[str, ...] = (),
    values: pa.Table | None = None,
) -> pa.Table | None:
    """The touched groups' output rows tagged upsert / delete (plus the `hidden` state columns),
    or None where a column's type is not already the output's (Spark casts it then). With value
    slots, `groups` holds every slot's sums (slot 0 is the group's) and `values` the MIN / MAX /
    DISTINCT results of the touched groups."""
    if state.has_slots:
        groups = groups.filter(pc.equal(groups.column(SLOT), 0))
        values = _aligned(values, groups, state.keys)
    results = pa.table(
        [
            *[groups.column(k) for k in state.keys],
            *[_result(j, call, groups, values) for j, call in enumerate(state.node.aggregates)],
        ],
        names=[*state.keys, *[call.name for call in state.node.aggregates]],
    )
    names = tuple(f.name for f in output.fields)
    columns = picked_columns(results, post, names)
    if columns is None or any(
        from_arrow_type(results.schema.field(c).type) != f.dataType for c, f in zip(columns, output.fields)
    ):
        return None
    # A global aggregate's one row stays, whatever its count (finalize's rule).
    alive = (
        pa.array(np.ones(groups.num_rows, bool))
        if state.node.is_global
        else pc.greater(pc.fill_null(groups.column(COUNT), 0), 0)
    )
    tags = pc.if_else(alive, UPSERT, DELETE)
    return pa.table(
        [*[results.column(c) for c in columns], *[groups.column(h) for h in hidden], tags], names=[*names, *hidden, OP]
    )


def _aligned(values: pa.Table, groups: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """`values`' row of each group, in the groups' order (all NULL for a group it lacks), keys
    equal as Spark's null-safe join compares them (row_counts.key_positions)."""
    found = key_positions(groups, values, keys)
    return values.take(pa.array(found, mask=found < 0))


def _result(j: int, call: AggCall, groups: pa.Table, values: pa.Table | None) -> pa.ChunkedArray:
    if not call.invertible:
        assert values is not None, "a multiset aggregate has value slots, whose results finished_groups is given"
        value = values.column(call.name)
        return pc.fill_null(value, 0) if call.func == "COUNT" else value
    if call.arg is None:
        return groups.column(COUNT)
    n = groups.column(nonnull_column(j))
    if call.func == "COUNT":
        return n
    counted = pc.greater(pc.fill_null(n, 0), 0)
    total = groups.column(sum_column(j))
    if call.func == "SUM":
        return pc.if_else(counted, total, pa.scalar(None, total.type))
    average = pc.divide(total.cast(pa.float64()), n.cast(pa.float64()))
    return pc.if_else(counted, average, pa.scalar(None, pa.float64()))


def _decimal_average(call: AggCall, state: AggregateState) -> bool:
    """AVG of a DECIMAL: Spark divides and rounds in decimals, which is left to it."""
    return call.func == "AVG" and call.arg is not None and isinstance(state.arg_types[call.arg], DecimalType)
