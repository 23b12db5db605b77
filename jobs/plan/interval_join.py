"""Which regular joins are interval joins: an ON condition that bounds one side's event time by
the other's, `a.ts BETWEEN b.ts - INTERVAL ... AND b.ts + INTERVAL ...`, over two insert-only
inputs whose time columns are their sources' event times (Flink plans such a join as an interval
join; over an updating input, as a regular one).

The bounds let the stream forget a row once no row still to come can match it: rows to come are
on time, after their side's watermark (jobs/stream/operators/join/expiry.py). The join's rows
are the regular join's either way.
"""

from __future__ import annotations

from datetime import timedelta

from sqlglot import exp

from jobs.plan.nodes import Calc, ChangelogSource, Node, TimeBounds
from jobs.plan.sql import conjuncts
from jobs.spec.intervals import parse_interval
from jobs.spec.model import QuerySpec


def time_bounds(
    spec: QuerySpec, left: Node, right: Node, output: tuple[str, ...], condition: exp.Expression | None
) -> TimeBounds | None:
    """The bounds, when the join is an interval join; else None."""
    if condition is None or not (insert_only(left) and insert_only(right)):
        return None
    left_time, right_time = (
        event_time_of(spec, left, output),
        event_time_of(spec, right, output[len(left.output_names) :]),
    )
    if left_time is None or right_time is None:
        return None
    for between in conjuncts(condition):
        if not isinstance(between, exp.Between) or not isinstance(between.this, exp.Column):
            continue
        low, high = _offset(between.args["low"]), _offset(between.args["high"])
        if low is None or high is None or low[0] != high[0]:
            continue
        bounded, other = between.this.name, low[0]
        if (bounded, other) == (left_time, right_time):
            return TimeBounds(left_time, right_time, low[1], high[1])
        if (bounded, other) == (right_time, left_time):  # right in [left + l, left + u]: left in [right - u, right - l]
            return TimeBounds(left_time, right_time, -high[1], -low[1])
    return None


def insert_only(node: Node) -> bool:
    if isinstance(node, ChangelogSource):
        return node.insert_only
    return isinstance(node, Calc) and insert_only(node.input)


def event_time_of(spec: QuerySpec, node: Node, names: tuple[str, ...]) -> str | None:
    """The output column (of `names`, the side's names in the join) that carries the side's
    source's event time, if the source has one and a watermark."""
    column = _event_time_column(spec, node)
    if column is None or column not in node.output_names:
        return None
    return names[node.output_names.index(column)]


def _event_time_column(spec: QuerySpec, node: Node) -> str | None:
    if isinstance(node, ChangelogSource):
        source = spec.sources.get(node.table)
        return source.event_time if source is not None and source.watermark_delay is not None else None
    if isinstance(node, Calc):
        inner = _event_time_column(spec, node.input)
        picked = [n for n, e in node.projections if isinstance(e, exp.Column) and not e.table and e.name == inner]
        return picked[0] if inner is not None and picked else None
    return None


def _offset(expression: exp.Expression) -> tuple[str, timedelta] | None:
    """column, column + INTERVAL ..., column - INTERVAL ...: (column, offset)."""
    if isinstance(expression, exp.Paren):
        return _offset(expression.this)
    if isinstance(expression, exp.Column):
        return expression.name, timedelta(0)
    if isinstance(expression, (exp.Add, exp.Sub)) and isinstance(expression.this, exp.Column):
        interval = _interval(expression.expression)
        if interval is None:
            return None
        return expression.this.name, interval if isinstance(expression, exp.Add) else -interval
    return None


def _interval(expression: exp.Expression) -> timedelta | None:
    if not isinstance(expression, exp.Interval) or expression.unit is None:
        return None
    try:
        return parse_interval(f"{expression.this.name} {expression.unit.name}")
    except ValueError:
        return None
