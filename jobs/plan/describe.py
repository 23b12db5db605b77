"""Describe a plan node on one line, for `explain` and for error messages that name an operator."""

from __future__ import annotations

from jobs.changelog.columns import WINDOW_END
from jobs.plan.event_time import bound_of
from jobs.plan.nodes import (
    Calc,
    ChangelogSource,
    Deduplicate,
    GroupAggregate,
    Join,
    LookupJoin,
    Node,
    OverAggregate,
    SessionAggregate,
    StageInput,
    TemporalJoin,
    UnionAll,
    WindowAggregate,
    WindowAssign,
)
from jobs.plan.window_rows import window_join_bounds
from jobs.spec.intervals import describe


def _rank_state(node: Deduplicate) -> str:
    if any(bound_of(node.input, k) == WINDOW_END for k in node.keys):
        return "live rows per key, until the watermark passes the window's end (local engine)"
    return "live rows per key"


def describe_node(node: Node) -> str:
    """One line per operator, Flink-style: its kind and its parameters in a fixed order."""
    if isinstance(node, SessionAggregate):
        select = ", ".join(
            ["window.start AS __wstart", "window.end AS __wend"] + _aggregate_select(node, node.other_keys)
        )
        return (
            f"SessionWindowAggregate(groupBy=[{', '.join(node.other_keys)}], window=[{node.window.describe()}], "
            f"emit=[{node.emit}], select=[{select}], state=[live rows per key; a change re-forms its key's "
            f"sessions, late=[its session, merged, closed by the watermark: left out, see late_events]])"
        )
    if isinstance(node, WindowAggregate):
        select = ", ".join(
            ["window.start AS __wstart", "window.end AS __wend"] + _aggregate_select(node, node.other_keys)
        )
        return (
            f"WindowAggregate(groupBy=[{', '.join(node.other_keys)}], window=[{node.window.describe()}], "
            f"emit=[{node.emit}], select=[{select}], state=[{_state(node)}])"
        )
    if isinstance(node, GroupAggregate):
        select = ", ".join(_aggregate_select(node, node.group_keys))
        return f"GroupAggregate(groupBy=[{', '.join(node.group_keys)}], select=[{select}], state=[{_state(node)}])"
    if isinstance(node, WindowAssign):
        end = (
            "bounded: every window closes at the end of the input"
            if node.bounded
            else "unbounded: windows stay open until the watermark passes"
        )
        over_rows = any(n.stateful for n in node.input.walk())  # an earlier operator's, in a later stage
        watermark = (
            f"the source's (its event time - {describe(node.watermark)}), as the earlier operator's rows carry it"
            if over_rows
            else f"{node.window.time_col} - {describe(node.watermark)}"
        )
        return (
            f"WindowAssign(window=[{node.window.describe()}], "
            f"watermark=[{watermark}], "
            f"late=[window closed by the watermark: left out, see late_events], endOfInput=[{end}])"
        )
    if isinstance(node, Calc):
        select = ", ".join(_projection(name, expr) for name, expr in node.projections)
        where = f", where=[{node.condition.sql('spark')}]" if node.condition is not None else ""
        return f"Calc(select=[{select}]{where})"
    if isinstance(node, Deduplicate) and node.is_top_n:
        return (
            f"Rank(rankRange=[rankStart=1, rankEnd={node.limit}], partitionBy=[{', '.join(node.keys)}], "
            f"orderBy=[{node.order_col} {'DESC' if node.keep == 'last' else 'ASC'}], "
            f"select=[{', '.join(node.output_names)}], state=[{_rank_state(node)}])"
        )
    if isinstance(node, Deduplicate):
        return (
            f"Deduplicate(keep=[{'LastRow' if node.keep == 'last' else 'FirstRow'}], "
            f"key=[{', '.join(node.keys)}], order=[{node.order_col} "
            f"{'DESC' if node.keep == 'last' else 'ASC'}], state=[{_rank_state(node)}])"
        )
    if isinstance(node, Join):
        where = f", where=[{node.condition.sql('spark')}]" if node.condition is not None else ""
        pairs = ", ".join(f"{left} = {right}" for left, right in zip(node.left_keys, node.right_keys))
        kind = {"semi": "LeftSemi", "anti": "LeftAnti"}.get(node.kind, node.kind.capitalize())
        if isinstance(node, TemporalJoin):
            return (
                f"TemporalJoin(joinType=[{kind}Join], on=[{pairs}], asOf=[{node.left_time}], "
                f"versionTime=[{node.right_time}], select=[{', '.join(node.output)}], state=[rows of the left "
                f"until the right's watermark passes their time; versions per key from the latest at or "
                f"before both watermarks on])"
            )
        if node.time_bounds is not None:
            return (
                f"IntervalJoin(joinType=[{kind}Join], on=[{pairs}]{where}, "
                f"windowBounds=[{node.time_bounds.describe()}], select=[{', '.join(node.output)}], "
                f"state=[rows per join key, each side, until the other side's watermark passes their "
                f"time plus the bound (local engine; kept on the spark engine)])"
            )
        if window_join_bounds(node) is not None:
            return (
                f"WindowJoin(joinType=[{kind}Join], on=[{pairs}]{where}, select=[{', '.join(node.output)}], "
                f"state=[rows per join key, each side, until the other side's watermark passes their window's "
                f"end (local engine; kept on the spark engine)])"
            )
        return (
            f"Join(joinType=[{kind}Join], on=[{pairs}]{where}, "
            f"select=[{', '.join(node.output)}], state=[live rows per join key, each side])"
        )
    if isinstance(node, OverAggregate):
        calls = ", ".join(f"{call.this.sql('spark')} AS {name}" for name, call in node.calls)
        spec = node.calls[0][1].args.get("spec")
        frame = spec.sql("spark") if spec is not None else "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
        return (
            f"OverAggregate(partitionBy=[{', '.join(node.partition_keys)}], orderBy=[{node.order_col} ASC], "
            f"window=[{frame}], "
            f"select=[{', '.join(node.input.output_names)}, {calls}], state=[live rows per partition])"
        )
    if isinstance(node, UnionAll):
        return f"Union(all=[true], union=[{', '.join(node.output_names)}])"
    if isinstance(node, LookupJoin):
        pairs = ", ".join(f"{i} = {node.lookup}.{k}" for i, k in zip(node.input_keys, node.lookup_columns))
        return (
            f"LookupJoin(table=[{node.lookup}], joinType=[{node.kind.capitalize()}Join], on=[{pairs}], "
            f"select=[{', '.join(node.output)}], state=[none: each row, retractions too, is "
            f"looked up when it arrives])"
        )
    if isinstance(node, StageInput):
        key = f", upsertKey=[{', '.join(node.primary_key)}]" if node.primary_key else ""
        return f"StageInput(stage=[{node.stage}], table=[{node.table}]{key})"
    if isinstance(node, ChangelogSource):
        pk = f", primaryKey=[{', '.join(node.primary_key)}]" if node.primary_key else ""
        return (
            f"ChangelogSource(table=[{node.table}], format=[{node.format}], "
            f"fields=[{', '.join(node.schema.names)}]{pk})"
        )
    raise TypeError(f"cannot explain {type(node).__name__}")


def _aggregate_select(node: GroupAggregate | SessionAggregate, keys) -> list[str]:
    return list(keys) + [f"{a.sql()} AS {a.name}" for a in node.aggregates]


def _state(node: GroupAggregate) -> str:
    return ", ".join(
        ["row count"] + [f"{a.sql()} {'invertible' if a.invertible else 'multiset'}" for a in node.aggregates]
    )


def _projection(name: str, expr) -> str:
    text = expr.sql("spark")
    return text if text == name else f"{text} AS {name}"
