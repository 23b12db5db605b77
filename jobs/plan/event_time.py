"""Which output columns of a node are event times (Flink's time attributes): a window may group
by one of them, and its windows close by that event time's watermark.

- A source's event time, when the spec gives it a watermark, is one.
- A projection that passes it unchanged keeps it; a deduplication or a Top-N, which pass whole
  rows, keep it.
- A tumbling or hopping window makes `window_time(window)` one: its end less one microsecond
  (Spark's; Flink's window_time is the end less one millisecond, the same window either way).
- An interval join keeps both sides' event times, its watermark held back by its bounds; a
  regular join or a group aggregate makes it a plain timestamp, as in Flink.

Every event time carries the watermark of the source it comes from: a stage's rows reach the
next stage with the watermark the source had when the stage committed them (changelog/feed.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.plan.nodes import Calc, ChangelogSource, Deduplicate, Join, Node, WindowAggregate, WindowAssign
from jobs.spec.model import QuerySpec

WINDOW_TIME = "window_time"
_WINDOW_TIME_CALL = re.compile(r"\bwindow_time\s*\(\s*window\s*\)", re.IGNORECASE)


@dataclass(frozen=True)
class EventTime:
    watermark: timedelta  # the source's watermark delay
    bounded: bool  # the source is a finished changelog


def event_times(spec: QuerySpec, node: Node) -> dict[str, EventTime]:
    """The node's output columns that are event times."""
    if type(node) is ChangelogSource:
        source = spec.sources[node.table]
        if source.event_time is None or source.watermark_delay is None:
            return {}
        named = [n for n in node.output_names if n.lower() == source.event_time.lower()]
        return {n: EventTime(source.watermark_delay, source.bounded) for n in named}
    if isinstance(node, Calc):
        return _through_calc(spec, node)
    if isinstance(node, Deduplicate):
        return {n: t for n, t in event_times(spec, node.input).items() if n in node.output_names}
    if isinstance(node, Join) and node.time_bounds is not None:
        return _through_interval_join(spec, node)
    return {}


def _through_interval_join(spec: QuerySpec, join: Join) -> dict[str, EventTime]:
    """An interval join keeps both sides' event times (Flink's too); its rows go on with the
    join's watermark, the lower of the two sides' held back by the bounds (join_delay)."""
    found = {}
    outputs = iter(join.output)
    for side in (join.left, join.right):
        inner = event_times(spec, side)
        for name, output in zip(side.output_names, outputs):
            if name in inner:
                found[output] = inner[name]
    return found


def join_delay(join: Join) -> timedelta:
    """How far an interval join holds its watermark back: a row still to come on one side can
    join a row of the other this far behind it (Flink's maximum output delay)."""
    assert join.time_bounds is not None, "only an interval join holds its watermark back"
    return max(-join.time_bounds.lower, join.time_bounds.upper, timedelta(0))


def _through_calc(spec: QuerySpec, calc: Calc) -> dict[str, EventTime]:
    inner = event_times(spec, calc.input)
    window = _window_of(calc.input)
    found = {}
    for name, expression in calc.projections:
        if isinstance(expression, exp.Column) and not expression.table and expression.name in inner:
            found[name] = inner[expression.name]
        elif window is not None and is_window_time(expression):
            found[name] = EventTime(window.watermark, window.bounded)
    return found


def _window_of(node: Node) -> WindowAssign | None:
    if isinstance(node, WindowAggregate) and isinstance(node.input, WindowAssign):
        return node.input
    return None


def window_time(end: exp.Column | None = None) -> exp.Expression:
    """window_time(window) over a window's rows: the latest time inside the window."""
    one = exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MICROSECOND"))
    return exp.Sub(this=end if end is not None else exp.column(WINDOW_END), expression=one)


def is_window_time(expression: exp.Expression) -> bool:
    return expression == window_time()


def is_window_time_call(expression: exp.Expression) -> bool:
    """The user's window_time(window)."""
    return (
        isinstance(expression, exp.Anonymous)
        and str(expression.this).lower() == WINDOW_TIME
        and len(expression.expressions) == 1
        and isinstance(expression.expressions[0], exp.Column)
        and not expression.expressions[0].table
        and expression.expressions[0].name.lower() == "window"
    )


def window_times_written_out(sql: str) -> str:
    """The SQL with each window_time(window) of a windowed SELECT written as Spark runs it in
    batch: window.end less one microsecond (Spark takes window_time() only over a window column
    that a subquery selected)."""
    return _WINDOW_TIME_CALL.sub("(window.end - INTERVAL '1' MICROSECOND)", sql)


def renamed_event_time(node: Node, name: str) -> str | None:
    """The name an event time had where it was read (a source's column, passed on under another
    name by a projection), if it differs; None when it was not renamed or was computed here
    (window_time)."""
    found = _traced(node, name, (Calc, Deduplicate))
    return found[1] if found is not None and found[1] != name else None


def bound_of(node: Node, name: str) -> str | None:
    """The window bound (__wstart / __wend) a column is, passed on unchanged by projections."""
    found = _traced(node, name, (Calc,))
    if found is None or not isinstance(found[0], WindowAssign):
        return None
    return found[1] if found[1] in (WINDOW_START, WINDOW_END) else None


def _traced(node: Node, name: str, through: tuple[type, ...]) -> tuple[Node, str] | None:
    """Where a column comes from, passed on unchanged by the `through` nodes: the first other
    node and the column's name there; None when a projection computes it."""
    while isinstance(node, through):
        if isinstance(node, Calc):
            expression = dict(node.projections).get(name)
            if not (isinstance(expression, exp.Column) and not expression.table):
                return None
            name = expression.name
        node = node.input  # type: ignore[attr-defined]
    return node, name
