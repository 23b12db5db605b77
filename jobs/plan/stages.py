"""Cut a plan into stages: one stateful operator's result feeds the next through a Delta table.

A stateful operator that consumes another one's retractions (an aggregate over a deduplication,
an aggregate over a join, an aggregate over an aggregate) does not run in the same streaming
query: the lower operator's result is written to an intermediate Delta table with change data
feed, and the upper one reads that feed as its changelog. Each intermediate table can be compared
with its batch equivalent (to_sql), which names the first stage where stream and batch part.

    stage 1:  Deduplicate(orders)             -> stages/1-dedup   (keyed by order_id)
    stage 2:  GroupAggregate(StageInput(1))   -> the sink
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jobs.plan.nodes import (Annotations, ChangelogSource, Deduplicate, GroupAggregate, Join, Node, Sink,
                             StageInput, UnionAll)
from jobs.plan.to_sql import to_sql

KIND_NAMES = {Deduplicate: "dedup", Join: "join", GroupAggregate: "aggregate"}


@dataclass(frozen=True)
class Stage:
    number: int  # 1, 2, ...; the last stage writes the query's sink
    name: str  # its table name, e.g. "stage1_dedup"; the sink's name for the last stage
    root: Sink
    original: Node  # the subtree of the full plan this stage computes (for its batch SQL)

    @property
    def is_final(self) -> bool:
        return self.original is None

    def batch_sql(self) -> str:
        return to_sql(self.original)


def split_stages(root: Sink, notes: Annotations, schema_of) -> list[Stage]:
    """The stages in the order they run. `schema_of(node) -> SourceSchema` types an
    intermediate table (the stage's SQL run on empty inputs)."""
    stages: list[Stage] = []

    def cut(node: Node, under_stateful: bool) -> Node:
        if node.stateful and under_stateful:
            body = cut_children(node, True)
            number = len(stages) + 1
            name = f"stage{number}_{_kind_name(node)}"
            key = notes.upsert_keys[node]
            mode = "upsert" if key is not None else "retract"
            stages.append(Stage(number, name, Sink(body, name, None, "none", mode), node))
            return StageInput(name, schema_of(node), "changelog-json", tuple(key or ()), number)
        return cut_children(node, under_stateful or node.stateful)

    def cut_children(node: Node, below: bool) -> Node:
        children = [cut(c, below) for c in node.inputs]
        if all(a is b for a, b in zip(children, node.inputs)):
            return node
        return _with_inputs(node, children)

    body = cut(root.input, False)
    final = root if body is root.input else replace(root, input=body)
    stages.append(Stage(len(stages) + 1, root.table, final, None))
    return stages


def _kind_name(node: Node) -> str:
    return next((name for cls, name in KIND_NAMES.items() if isinstance(node, cls)), "stage")


def _with_inputs(node: Node, children: list[Node]) -> Node:
    if isinstance(node, Join):
        return replace(node, left=children[0], right=children[1])
    if isinstance(node, UnionAll):
        return replace(node, branches=tuple(children))
    if isinstance(node, ChangelogSource):
        return node
    return replace(node, input=children[0])

