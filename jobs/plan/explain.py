"""`lockstep explain`: the plan as a tree, each node with its changelog mode, Flink-style.

Deterministic by construction: nodes print their fields in a fixed order and never an object id.
"""

from __future__ import annotations

from jobs.plan.describe import describe_node
from jobs.plan.nodes import Join, Node, Sink
from jobs.plan.plan import Plan, Planned, StagePlan


def explain(plan: Plan) -> str:
    lines = [f"== {plan.spec.name} =="]
    _tree(plan, plan.root, "", True, lines, top=True)
    key = ", ".join(plan.sink_key)
    lines += ["", f"upsert key: [{key}]", _sink_line(plan)]
    lines += [f"upsert materializer: {reason}" for reason in plan.notes.materialize]
    lines += [_lookup_line(name, spec) for name, spec in plan.spec.lookups.items()]
    lines += [f"WARNING {warning}" for warning in plan.warnings]
    stages = plan.stages
    if len(stages) > 1:
        lines += [
            "",
            "stages (each intermediate result is a Delta table with change data feed, read by the next stage):",
        ]
        lines += [
            f"  {s.number}. {s.name}: {describe_node(s.root.input)} -> {'the sink' if s.is_final else _stage_table(s)}"
            for s in stages
        ]
    return "\n".join(lines) + "\n"


def _lookup_line(name: str, spec) -> str:
    cache = f"cache {spec.cache.max_rows:,} rows for {spec.cache.ttl}" if spec.cache.max_rows else "no cache"
    return (
        f"lookup {name}: {spec.kind.upper()} {spec.url}, key [{', '.join(spec.key)}], up to "
        f"{spec.capacity} requests in flight per task, {spec.order}, timeout {spec.timeout}, "
        f"{spec.retries} retries, {cache}, on error: {spec.on_lookup_error}"
    )


def _sink_line(plan: Plan) -> str:
    feed = (
        "its change data feed is the output changelog (insert=+I, update_preimage=-U, update_postimage=+U, delete=-D)"
    )
    if plan.write_mode == "retract":
        chosen = (
            " (the spec names no sink mode or primary key, and the query's output has no unique key)"
            if plan.root.changelog_mode is None and plan.sink_mode == "retract"
            else ""
        )
        return f"sink: Delta table of rows with a copy count (__count), MERGEd by every column{chosen}; {feed}"
    return f"sink: Delta table keyed by [{', '.join(plan.sink_key)}], written by MERGE; {feed}"


def _stage_table(stage: StagePlan) -> str:
    key = stage.sink_key if stage.write_mode == "upsert" else None
    kept = f"keyed by [{', '.join(key)}]" if key is not None else "a multiset with copy counts"
    return f"stages/{stage.name} ({kept})"


def _tree(plan: Planned, node: Node, prefix: str, last: bool, lines: list[str], top=False) -> None:
    text = f"{_describe(plan, node)}, changelogMode={plan.changelog_mode(node)}"
    key, unique = plan.notes.upsert_keys.get(node), plan.notes.unique_keys.get(node)
    if not isinstance(node, Sink):
        text += f", upsertKey=[{', '.join(key)}]" if key is not None else ", upsertKey=none"
        text += f", uniqueKey=[{', '.join(unique)}]" if unique is not None and unique != key else ""
    lines.append(text if top else f"{prefix}+- {text}")
    child_prefix = prefix if top else prefix + "   "
    for i, child in enumerate(node.inputs):
        _tree(plan, child, child_prefix, i == len(node.inputs) - 1, lines)


def _describe(plan: Planned, node: Node) -> str:
    if isinstance(node, Join):
        sides = (
            f"leftInputSpec=[{_input_spec(plan, node.left, node.left_keys)}], "
            f"rightInputSpec=[{_input_spec(plan, node.right, node.right_keys)}]"
        )
        return describe_node(node).replace(", state=[", f", {sides}, state=[")
    if isinstance(node, Sink):
        materialize = "true" if plan.notes.materialize else "false"
        return (
            f"Sink(table=[{node.table}], primaryKey=[{', '.join(plan.sink_key)}], "
            f"changelogMode=[{plan.sink_mode}], upsertMaterialize=[{materialize}])"
        )
    return describe_node(node)


def _input_spec(plan: Planned, side: Node, join_keys: tuple[str, ...]) -> str:
    """Seed 001's three cases for a join input: at most one row per join key, rows identified by
    a unique key, or possible duplicates (Flink's JoinInputSideSpec)."""
    key = plan.notes.upsert_keys.get(side)
    if key is None:
        return "NoUniqueKey"
    if {k.lower() for k in key} <= {k.lower() for k in join_keys}:
        return "JoinKeyContainsUniqueKey"
    return f"HasUniqueKey([{', '.join(key)}])"
