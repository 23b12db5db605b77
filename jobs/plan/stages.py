"""Cut a plan into stages: one stateful operator's result feeds the next through a Delta table.

A stateful operator that consumes another one's retractions (an aggregate over a deduplication,
an aggregate over a join, an aggregate over an aggregate) does not run in the same streaming
query: the lower operator's result is written to an intermediate Delta table with change data
feed, and the upper one reads that feed as its changelog. Each intermediate table can be compared
with its batch equivalent (to_sql), which names the first stage where stream and batch part.

    stage 1:  Deduplicate(orders)             -> stages/stage1_dedup   (keyed by order_id)
    stage 2:  GroupAggregate(StageInput(1))   -> the sink
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.plan.annotations import Annotations
from jobs.plan.event_time import event_times
from jobs.plan.nodes import (
    Calc,
    Deduplicate,
    GroupAggregate,
    Join,
    Node,
    OverAggregate,
    Sink,
    StageInput,
    Unary,
    UnionAll,
    WindowAggregate,
    WindowAssign,
)
from jobs.plan.to_sql import to_sql
from jobs.spec.model import QuerySpec

# A window's bounds under names a stage table may hold (its columns may not start with "__").
STAGE_COLUMNS = {WINDOW_START: "lockstep_window_start", WINDOW_END: "lockstep_window_end"}
KIND_NAMES = {Deduplicate: "dedup", Join: "join", GroupAggregate: "aggregate", OverAggregate: "over"}


@dataclass(frozen=True)
class Cut:
    """One stage as cut from the whole plan: its own root, and the subtree of the whole plan it
    computes (None for the last stage, whose batch equivalent is the user's SQL)."""

    number: int
    root: Sink
    original: Node | None

    @property
    def batch_sql(self) -> str | None:
        return to_sql(self.original) if self.original is not None else None


def split_stages(spec: QuerySpec, root: Sink, notes: Annotations) -> list[Cut]:
    """The stages in the order they run; the last writes the query's sink."""
    cuts: list[Cut] = []
    windowed = {n for w in root.walk() if isinstance(w, WindowAssign) for n in w.input.walk()}

    def cut(node: Node, under_stateful: bool) -> Node:
        if node.stateful and under_stateful:
            body = cut_children(node, True)
            number = len(cuts) + 1
            name = f"stage{number}_{_kind_name(node)}"
            key = tuple(notes.upsert_keys[node] or ())
            mode = "upsert" if notes.upsert_keys[node] is not None else "retract"
            shown = {n: STAGE_COLUMNS.get(n, n) for n in node.output_names}
            if any(shown[n] != n for n in node.output_names):  # a window's: stage tables name no "__" column
                body = Calc(body, tuple((shown[n], exp.column(n)) for n in node.output_names))
            cuts.append(Cut(number, Sink(body, name, None, "none", mode), body))
            time = _event_time(spec, node, shown) if node in windowed else None
            staged = StageInput(name, tuple(shown.values()), tuple(shown[k] for k in key), number, time)
            if body is node:
                return staged
            return Calc(staged, tuple((n, exp.column(shown[n])) for n in node.output_names))
        return cut_children(node, under_stateful or node.stateful)

    def cut_children(node: Node, below: bool) -> Node:
        children = [cut(c, below) for c in node.inputs]
        if all(a is b for a, b in zip(children, node.inputs)):
            return node
        return _with_inputs(node, children)

    body = cut(root.input, False)
    final = root if body is root.input else replace(root, input=body)
    cuts.append(Cut(len(cuts) + 1, final, None))
    return cuts


def _event_time(spec: QuerySpec, node: Node, shown: dict[str, str]) -> str | None:
    """The stage table's column that a later window's watermark is typed by: a window's end,
    or the event time the stage's rows keep."""
    if isinstance(node, WindowAggregate):
        return shown[WINDOW_END]
    times = event_times(spec, node)
    return shown[next(iter(times))] if times else None


def _kind_name(node: Node) -> str:
    if isinstance(node, Deduplicate) and node.is_top_n:
        return "topn"
    if isinstance(node, Join) and node.filters_left:
        return node.kind
    return next((name for cls, name in KIND_NAMES.items() if isinstance(node, cls)), "stage")


def _with_inputs(node: Node, children: list[Node]) -> Node:
    if isinstance(node, Join):
        return replace(node, left=children[0], right=children[1])
    if isinstance(node, UnionAll):
        return replace(node, branches=tuple(children))
    if isinstance(node, Unary):
        return replace(node, input=children[0])
    return node  # a leaf: it has no inputs to replace
