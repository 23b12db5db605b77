"""`lockstep explain`: the plan as a tree, each node with its changelog mode, Flink-style.

Deterministic by construction: nodes print their fields in a fixed order and never an object id.
"""

from __future__ import annotations

from jobs.plan.nodes import Calc, ChangelogSource, GroupAggregate, Node, Sink, WindowAggregate, WindowAssign
from jobs.spec.intervals import describe
from jobs.plan.planner import QueryPlan


def explain(plan: QueryPlan) -> str:
    lines = [f"== {plan.spec.name} =="]
    _tree(plan, plan.root, "", True, lines, top=True)
    key = ", ".join(plan.sink_key)
    lines += ["", f"upsert key: [{key}]",
              f"sink: Delta table keyed by [{key}], written by MERGE; its change data feed is the "
              f"output changelog (insert=+I, update_preimage=-U, update_postimage=+U, delete=-D)"]
    return "\n".join(lines) + "\n"


def _tree(plan: QueryPlan, node: Node, prefix: str, last: bool, lines: list[str], top=False) -> None:
    text = f"{_describe(plan, node)}, changelogMode={plan.changelog_mode(node)}"
    key = plan.notes.upsert_keys.get(node)
    if not isinstance(node, Sink):
        text += f", upsertKey=[{', '.join(key)}]" if key is not None else ", upsertKey=none"
    lines.append(text if top else f"{prefix}+- {text}")
    child_prefix = prefix if top else prefix + "   "
    for i, child in enumerate(node.inputs):
        _tree(plan, child, child_prefix, i == len(node.inputs) - 1, lines)


def _describe(plan: QueryPlan, node: Node) -> str:
    if isinstance(node, Sink):
        return (f"Sink(table=[{node.table}], primaryKey=[{', '.join(plan.sink_key)}], "
                f"upsertMaterialize=[false])")
    if isinstance(node, WindowAggregate):
        select = ", ".join(["window.start AS __wstart", "window.end AS __wend"]
                           + _aggregate_select(node, node.other_keys))
        return (f"WindowAggregate(groupBy=[{', '.join(node.other_keys)}], window=[{node.window.describe()}], "
                f"emit=[{node.emit}], select=[{select}], state=[{_state(node)}])")
    if isinstance(node, GroupAggregate):
        select = ", ".join(_aggregate_select(node, node.group_keys))
        return (f"GroupAggregate(groupBy=[{', '.join(node.group_keys)}], select=[{select}], "
                f"state=[{_state(node)}])")
    if isinstance(node, WindowAssign):
        return (f"WindowAssign(window=[{node.window.describe()}], "
                f"watermark=[{node.window.time_col} - {describe(node.watermark)}], "
                f"late=[window closed by the watermark: left out, see late_events])")
    if isinstance(node, Calc):
        select = ", ".join(_projection(name, expr) for name, expr in node.projections)
        where = f", where=[{node.condition.sql('spark')}]" if node.condition is not None else ""
        return f"Calc(select=[{select}]{where})"
    if isinstance(node, ChangelogSource):
        pk = f", primaryKey=[{', '.join(node.primary_key)}]" if node.primary_key else ""
        return (f"ChangelogSource(table=[{node.table}], format=[{node.format}], "
                f"fields=[{', '.join(node.schema.names)}]{pk})")
    raise TypeError(f"cannot explain {type(node).__name__}")


def _aggregate_select(node: GroupAggregate, keys) -> list[str]:
    return list(keys) + [f"{a.sql()} AS {a.name}" for a in node.aggregates]


def _state(node: GroupAggregate) -> str:
    return ", ".join(["row count"] + [f"{a.sql()} {'invertible' if a.invertible else 'multiset'}"
                                      for a in node.aggregates])


def _projection(name: str, expr) -> str:
    text = expr.sql("spark")
    return text if text == name else f"{text} AS {name}"
