"""OVER aggregations and LAG: `SUM(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND
CURRENT ROW)`, Flink's OverAggregate. What is accepted is what Flink's planner accepts:

- every OVER of a SELECT has the same PARTITION BY and ORDER BY, and the aggregates one frame
  (Flink computes one window per SELECT);
- ORDER BY one column, ascending;
- ordered by the input's event time: an insert-only input, and a frame that ends at the current
  row (ROWS n or RANGE INTERVAL ... PRECEDING, or UNBOUNDED);
- ordered by another column: an unbounded frame, over any input;
- SUM, COUNT, AVG, MIN and MAX, and LAG ordered by event time (ordered otherwise, Flink's job
  fails once a row comes before rows already seen).

The SELECT's own items are computed over the calls' results (a Calc above the node), so an item
may combine them (`x - LAG(x) OVER (...) AS delta`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from jobs.errors import SqlError
from jobs.plan.interval_join import event_time_of, insert_only
from jobs.plan.nodes import Node, OverAggregate
from jobs.spec.model import QuerySpec


def over_calls(select: exp.Select) -> list[exp.Window]:
    """The OVER calls among a SELECT's items."""
    return [w for item in select.expressions for w in item.find_all(exp.Window)]


def over_aggregate(
    spec: QuerySpec, input: Node, calls: list[tuple[str, exp.Window]], where: Callable[[exp.Expression], str]
) -> OverAggregate:
    """The node of a SELECT's OVER calls (plan names inside, each with its output name)."""
    first = calls[0][1]
    for _, call in calls:
        _check_call(call, first, where)
    order = first.args["order"].expressions[0].this.name
    event_time = order == event_time_of(spec, input, input.output_names)
    if event_time and not insert_only(input):
        raise SqlError(
            "OVER ordered by event time needs an insert-only input (Flink's OverAggregate does not take "
            "updates or deletes; order by another column for a running aggregate over changes)",
            where=where(first),
        )
    for _, call in calls:
        _check_frame(call, event_time, where)
        if isinstance(call.this, exp.Lag) and not event_time:
            raise SqlError(
                "LAG ordered by a column other than the event time: Flink SQL plans it, but its job fails "
                "once a row comes before rows already seen, so lockstep has no reference to agree with",
                where=where(call),
            )
    keys = tuple(c.name for c in first.args.get("partition_by") or [])
    return OverAggregate(input, keys, order, event_time, tuple(calls))


def _check_call(call: exp.Window, first: exp.Window, where) -> None:
    order = call.args.get("order")
    ordered = order.expressions if order is not None else []
    if len(ordered) != 1 or not isinstance(ordered[0].this, exp.Column):
        raise SqlError("an OVER window orders by one column (Flink SQL's rule)", where=where(call))
    if ordered[0].args.get("desc"):
        raise SqlError("an OVER window orders ascending (Flink SQL's rule)", where=where(call))
    if any(not isinstance(c, exp.Column) for c in call.args.get("partition_by") or []):
        raise SqlError("an OVER window partitions by columns", where=where(call))
    same_frame = isinstance(call.this, exp.Lag) or isinstance(first.this, exp.Lag) or _frame(call) == _frame(first)
    if _window_key(call) != _window_key(first) or not same_frame:
        raise SqlError(
            "every OVER of a SELECT has the same PARTITION BY, ORDER BY and frame (Flink SQL computes one "
            "window per SELECT)",
            where=where(call),
        )


def _check_frame(call: exp.Window, event_time: bool, where) -> None:
    spec = call.args.get("spec")
    if spec is None:
        return
    if spec.args.get("end") != "CURRENT ROW":
        raise SqlError("an OVER frame ends at the CURRENT ROW (Flink SQL runs no FOLLOWING)", where=where(call))
    if not event_time and spec.args.get("start") != "UNBOUNDED":
        raise SqlError(
            "an OVER window ordered by a column other than the event time has an unbounded frame "
            "(Flink SQL: non-time attribute sort is not supported for bounded OVER windows)",
            where=where(call),
        )


def _window_key(call: exp.Window) -> tuple[str, str]:
    partition = ", ".join(c.sql("spark") for c in call.args.get("partition_by") or [])
    return partition, call.args["order"].sql("spark")


def _frame(call: exp.Window) -> str:
    spec = call.args.get("spec")
    return spec.sql("spark") if spec is not None else ""
