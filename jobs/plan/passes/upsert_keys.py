"""Upsert keys: the columns whose values identify an output row.

A source's key is its primary key; a Calc keeps a key when it projects every key column
unchanged; an aggregate's key is its group keys (empty for a global aggregate: one row). A window
is identified by its start (or, equally, its end: the size is fixed). A deduplication's key is its
partition key. A join keeps the keys of its sides when each contains that side's join key (so a
row's changes stay with one join key); when one side is unique on its join key, the other side's
key alone identifies a joined row. UNION ALL has no key (one key can come from two branches).
None means the output has no key: it is a multiset.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.plan.annotations import Annotations, frozen
from jobs.plan.nodes import (Calc, Deduplicate,
                             GroupAggregate, Join, LookupJoin, Node, Sink, StagedInput, UnionAll,
                             WindowAggregate, WindowAssign)


def run(root: Node, notes: Annotations) -> Annotations:
    keys: dict[Node, tuple[str, ...] | None] = {}
    for node in root.walk():
        keys[node] = _key(node, keys)
    return replace(notes, upsert_keys=frozen(keys))


def _key(node: Node, keys: dict) -> tuple[str, ...] | None:
    if isinstance(node, StagedInput):
        return node.primary_key or None
    if isinstance(node, WindowAggregate):
        return (WINDOW_START,) + node.other_keys
    if isinstance(node, GroupAggregate):
        return node.group_keys
    if isinstance(node, WindowAssign):
        key = keys[node.input]
        return None if key is None else key + (WINDOW_START,)
    if isinstance(node, Calc):
        return _through_projection(node, keys[node.input])
    if isinstance(node, (Sink, LookupJoin)):  # a lookup adds at most one row's columns per row
        return keys[node.input]
    if isinstance(node, Deduplicate):
        return node.keys
    if isinstance(node, Join):
        return _join_key(node, keys[node.left], keys[node.right])
    if isinstance(node, UnionAll):
        return None
    raise TypeError(f"no upsert-key rule for {type(node).__name__}")


def _through_projection(calc: Calc, key: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if key is None:
        return None
    renamed = {}
    for name, expr in calc.projections:
        if isinstance(expr, exp.Column) and expr.name.lower() not in renamed:
            renamed[expr.name.lower()] = name
    if WINDOW_START.lower() not in renamed and WINDOW_END.lower() in renamed:
        renamed[WINDOW_START.lower()] = renamed[WINDOW_END.lower()]
    if all(k.lower() in renamed for k in key):
        return tuple(renamed[k.lower()] for k in key)
    return None


def _join_key(join: Join, left: tuple[str, ...] | None, right: tuple[str, ...] | None
              ) -> tuple[str, ...] | None:
    def ordered(key, join_keys):
        return key is not None and {k.lower() for k in join_keys} <= {k.lower() for k in key}

    def unique_on_join_key(key, join_keys):
        return key is not None and {k.lower() for k in key} <= {k.lower() for k in join_keys}

    if not (ordered(left, join.left_keys) and ordered(right, join.right_keys)):
        return None
    if join.kind in ("inner", "left") and unique_on_join_key(right, join.right_keys):
        return left  # each left row meets at most one right row
    if join.kind in ("inner", "right") and unique_on_join_key(left, join.left_keys):
        return right
    return left + right
