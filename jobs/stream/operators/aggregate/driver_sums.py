"""A micro-batch's sums per group computed on the driver, from the rows operators/driver_input.py reads.

Where a group aggregate's input is a staged changelog (or a SELECT that only picks its columns),
the micro-batch's partial sums (group_sums.py) need no Spark job: the rows are read by Arrow and
summed there, each contribution in the type Spark's SUM gives it (BIGINT for integers,
DECIMAL(p+10, s) for a DECIMAL(p, s), DOUBLE for floating values), grouped as Spark groups, a sum
that leaves its type failing as Spark's ANSI arithmetic does. With MIN, MAX or DISTINCT
aggregates, each row is spread over the value slots as aggregate.streaming_aggregate spreads it
in Spark (slot 0 the invertible sums, slot i the i-th such aggregate's non-NULL value and the
row's weight) and summed per group, slot and value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT, SLOT, TOUCHED
from jobs.stream.operators.aggregate.streaming import AggregateState, state_columns, value_column
from jobs.stream.state.row_counts import SumOverflow, summed_per_group


def sums_on_driver(rows: pa.Table, state: AggregateState, schema: pa.Schema, now_ms: int) -> pa.Table:
    """Per group of `rows` (the input's columns and each row's weight as COUNT), the sums Spark's
    partial aggregation would give, in `schema` (its Arrow schema, TOUCHED last)."""
    weights = rows.column(COUNT).cast(pa.int64())
    columns = {k: rows.column(k) for k in state.keys}
    columns[COUNT] = weights
    for name, kind, arg in state_columns(state.node):
        x = rows.column(arg)
        if kind == "nonnull":
            columns[name] = pc.if_else(pc.is_null(x), pa.scalar(0, pa.int64()), weights)
        else:
            columns[name] = _signed(x.cast(schema.field(name).type), weights, name)
    columns[TOUCHED] = pa.array(np.full(rows.num_rows, now_ms, np.int64))
    if not state.has_slots:
        return summed_per_group(_shaped(columns, rows.num_rows, schema), state.keys)
    slots = [_shaped({**columns, SLOT: pa.array(np.zeros(rows.num_rows, np.int32))}, rows.num_rows, schema)]
    for i, (j, call) in enumerate(state.multiset_calls, start=1):
        valued = rows.filter(pc.is_valid(rows.column(call.arg)))
        slot = {
            **{k: valued.column(k) for k in (*state.keys, COUNT)},
            value_column(j): valued.column(call.arg),
            SLOT: pa.array(np.full(valued.num_rows, i, np.int32)),
            TOUCHED: pa.array(np.full(valued.num_rows, now_ms, np.int64)),
        }
        slots.append(_shaped(slot, valued.num_rows, schema))
    return summed_per_group(pa.concat_tables(slots), state.slot_key)


def _shaped(columns: dict, rows: int, schema: pa.Schema) -> pa.Table:
    """`columns` in the schema's order and types; a column not among them all NULL."""
    return pa.table(
        [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(rows, f.type) for f in schema],
        schema=schema.remove_metadata(),
    )


def _signed(x: pa.ChunkedArray, weights: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    """x for an addition, -x for a retraction."""
    try:
        return pc.if_else(pc.greater(weights, 0), x, pc.negate_checked(x))
    except pa.ArrowInvalid:
        raise SumOverflow(name, x.type) from None
