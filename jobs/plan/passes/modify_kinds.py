"""Which change kinds each node can emit (Flink's ModifyKindSet), bottom-up.

- a changelog source emits inserts, updates and deletes; a plain json source only inserts;
- a Calc emits what it receives, and a filter over updates can also turn an update into a delete
  (the new row no longer passes);
- a group aggregate over inserts only emits inserts and updates; over retractions it can also
  delete a group whose last row went; a global aggregate never deletes its one row, and
  a group without aggregates (SELECT DISTINCT) is only ever inserted or deleted;
- a window aggregate emitting final results inserts each window once (an append query); emitting
  early it is a group aggregate;
- window assignment passes changes through;
- a deduplication emits a key's first row as an insert and a better row (by its ordering) as an
  update; it deletes a key whose rows were all retracted; a Top-N can also push a row out;
- an inner join emits what its inputs do (two insert-only inputs join to inserts); an outer join
  also retracts a null-padded row when its first match arrives, so it emits every kind;
- UNION ALL emits what any branch does.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.plan.annotations import Annotations, frozen
from jobs.plan.nodes import (
    Calc,
    Deduplicate,
    GroupAggregate,
    Join,
    LookupJoin,
    Node,
    OverAggregate,
    SessionAggregate,
    Sink,
    StagedInput,
    TemporalJoin,
    UnionAll,
    WindowAggregate,
    WindowAssign,
)

INSERT, UPDATE, DELETE = "insert", "update", "delete"


def run(root: Node, notes: Annotations) -> Annotations:
    kinds: dict[Node, frozenset[str]] = {}
    for node in root.walk():
        kinds[node] = frozenset(_kinds(node, kinds))
    return replace(notes, modify_kinds=frozen(kinds))


def _kinds(node: Node, kinds: dict) -> set[str]:
    if isinstance(node, StagedInput):
        return {INSERT} if node.insert_only else {INSERT, UPDATE, DELETE}
    child = set().union(*(kinds[c] for c in node.inputs))
    if isinstance(node, (WindowAggregate, SessionAggregate)) and node.emit == "final":
        return {INSERT}
    if isinstance(node, SessionAggregate):  # a session's start moves: deleted under one key, inserted under another
        return {INSERT, UPDATE, DELETE}
    if isinstance(node, GroupAggregate):
        if node.is_global:
            return {INSERT, UPDATE}
        # Without aggregates (SELECT DISTINCT), a group has no value to update: it comes or goes.
        changes = {UPDATE} if node.aggregates else set()
        return {INSERT} | changes | (set() if child == {INSERT} else {DELETE})
    if isinstance(node, Calc):
        return child | ({DELETE} if node.condition is not None and UPDATE in child else set())
    if isinstance(node, (Sink, WindowAssign, UnionAll, LookupJoin)):
        return child
    if isinstance(node, Deduplicate) and node.is_top_n:
        return {INSERT, UPDATE, DELETE}  # a better row pushes the last of the N out
    if isinstance(node, Deduplicate):
        return {INSERT, UPDATE} | (set() if child == {INSERT} else {DELETE})
    if isinstance(node, (OverAggregate, TemporalJoin)):
        # A row (a version) that comes after the rows it goes before (applies to) changes theirs.
        return {INSERT, UPDATE, DELETE}
    if isinstance(node, Join):
        return child if node.kind == "inner" else {INSERT, UPDATE, DELETE}
    raise TypeError(f"no modify-kind rule for {type(node).__name__}")
