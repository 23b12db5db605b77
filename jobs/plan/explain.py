"""`lockstep explain`: the plan as a tree, each node with its changelog mode, Flink-style.

Deterministic by construction: nodes print their fields in a fixed order and never an object id.
"""

from __future__ import annotations

from jobs.plan.describe import describe_node
from jobs.plan.nodes import Node, Sink
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
        materialize = "true" if plan.notes.materialize else "false"
        return (f"Sink(table=[{node.table}], primaryKey=[{', '.join(plan.sink_key)}], "
                f"changelogMode=[{node.changelog_mode}], upsertMaterialize=[{materialize}])")
    return describe_node(node)
