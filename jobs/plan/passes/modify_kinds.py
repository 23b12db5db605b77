"""Which change kinds each node can emit (Flink's ModifyKindSet), bottom-up.

- a changelog source emits inserts, updates and deletes; a plain json source only inserts;
- a Calc emits what it receives, and a filter over updates can also turn an update into a delete
  (the new row no longer passes);
- a group aggregate over inserts only emits inserts and updates; over retractions it can also
  delete a group whose last row went; a global aggregate never deletes its one row, and
  a group without aggregates (SELECT DISTINCT) is only ever inserted or deleted;
- a window aggregate emitting final results inserts each window once (an append query); emitting
  early it is a group aggregate;
- window assignment passes changes through.
"""

from __future__ import annotations

from jobs.plan.nodes import (Annotations, Calc, ChangelogSource, GroupAggregate, Node, Sink,
                             WindowAggregate, WindowAssign)

INSERT, UPDATE, DELETE = "insert", "update", "delete"


def run(root: Node, notes: Annotations) -> None:
    for node in root.walk():
        notes.modify_kinds[node] = frozenset(_kinds(node, notes))


def _kinds(node: Node, notes: Annotations) -> set[str]:
    if isinstance(node, ChangelogSource):
        return {INSERT} if node.insert_only else {INSERT, UPDATE, DELETE}
    child = set(notes.modify_kinds[node.inputs[0]]) if node.inputs else set()
    if isinstance(node, WindowAggregate) and node.emit == "final":
        return {INSERT}
    if isinstance(node, GroupAggregate):
        if node.is_global:
            return {INSERT, UPDATE}
        # Without aggregates (SELECT DISTINCT), a group has no value to update: it comes or goes.
        changes = {UPDATE} if node.aggregates else set()
        return {INSERT} | changes | (set() if child == {INSERT} else {DELETE})
    if isinstance(node, Calc):
        return child | ({DELETE} if node.condition is not None and UPDATE in child else set())
    if isinstance(node, (Sink, WindowAssign)):
        return child
    raise TypeError(f"no modify-kind rule for {type(node).__name__}")
