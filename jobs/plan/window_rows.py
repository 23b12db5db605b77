"""A window's rows without an aggregate (Flink's window TVF: `SELECT window(ts, '1 minute').start
AS ws, ... FROM t`), and what may read them, as Flink's planner takes it:

- the sink, as they come;
- a Top-N per window: a ROW_NUMBER() partitioned by the window's start and end (Flink's window
  Top-N, and its window deduplication when ordered by the event time with rn = 1);
- a window join: two windows' rows joined on both windows' start and end, the same window on
  both sides (Flink's window join).

The input is insert-only (Flink's window Top-N, deduplication and join take inserts only). A
row whose window the watermark has closed is left out and listed (late_events).
"""

from __future__ import annotations

from datetime import timedelta

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.errors import SqlError
from jobs.plan.event_time import bound_of
from jobs.plan.interval_join import insert_only
from jobs.plan.nodes import Calc, Deduplicate, Join, Node, Sink, TimeBounds, WindowAggregate, WindowAssign
from jobs.spec.model import QuerySpec

WINDOW_JOIN_KINDS = ("inner", "left", "right", "full")


def check_window_rows(spec: QuerySpec, root: Sink) -> None:
    aggregated = {id(n.input) for n in root.walk() if isinstance(n, WindowAggregate)}
    for node in root.walk():
        if not isinstance(node, WindowAssign) or id(node) in aggregated:
            continue
        if not insert_only(node.input):
            raise SqlError(
                "a window's rows without GROUP BY need an insert-only source (format: json): Flink's window "
                "Top-N, deduplication and join take inserts only",
                where=str(spec.spec_path),
            )
        consumer = _consumer(root, node)
        if consumer is None or _ranked_per_window(consumer) or _joined_by_window(consumer):
            continue
        raise SqlError(
            "a window's rows without GROUP BY go to the sink, to a ROW_NUMBER() partitioned by the window's "
            "start and end (a window Top-N), or to a join of two windows' rows on both windows' start and end "
            "(a window join, INNER or OUTER); GROUP BY window(...) aggregates them",
            where=str(spec.spec_path),
        )


def state_bounds(join: Join) -> TimeBounds | None:
    """The bounds a join's state ends by, on either engine: an interval join's, or a window
    join's; None for a join that keeps its rows."""
    return join.time_bounds or window_join_bounds(join)


def window_join_bounds(join: Join) -> TimeBounds | None:
    """A window join's rows as an interval join's of zero width on the windows' ends: a row of
    one side can meet no row still to come once the other side's watermark reaches its window's
    end (operators/join/expiry.py lets it go then)."""
    if not _joined_by_window(join):
        return None
    left, right = next(
        (lk, rk)
        for lk, rk in zip(join.left_keys, join.right_keys)
        if bound_of(join.left, lk) == WINDOW_END and bound_of(join.right, rk) == WINDOW_END
    )
    return TimeBounds(left, right, timedelta(0), timedelta(0))


def _consumer(root: Sink, node: Node) -> Node | None:
    """The first stateful node above `node`, if any."""
    parents = {id(c): n for n in root.walk() for c in n.inputs}
    above = parents.get(id(node))
    while above is not None and not above.stateful:
        above = parents.get(id(above))
    return above


def _ranked_per_window(node: Node) -> bool:
    if not isinstance(node, Deduplicate):
        return False
    return {WINDOW_START, WINDOW_END} <= {bound_of(node.input, key) for key in node.keys}


def _joined_by_window(node: Node) -> bool:
    if not isinstance(node, Join) or node.kind not in WINDOW_JOIN_KINDS:
        return False
    pairs = {(bound_of(node.left, lk), bound_of(node.right, rk)) for lk, rk in zip(node.left_keys, node.right_keys)}
    left, right = _assign_under(node.left), _assign_under(node.right)
    same_window = (
        left is not None
        and right is not None
        and left.window.spark_sql().split(",", 1)[1:] == right.window.spark_sql().split(",", 1)[1:]
    )
    return same_window and {(WINDOW_START, WINDOW_START), (WINDOW_END, WINDOW_END)} <= pairs


def _assign_under(node: Node) -> WindowAssign | None:
    while isinstance(node, Calc):
        node = node.input
    return node if isinstance(node, WindowAssign) else None
