"""Unique keys and upsert keys: the columns whose values identify an output row.

Flink tells the two apart (seed 003). A unique key identifies a row of the result; an upsert key
is a unique key whose changes also arrive in order, one key's changes never overtaking each other.
They part at a join: its two keys together identify a joined row, but a row that changes its join
key is retracted under the old join key and inserted under the new one, and after a shuffle by
join key those two changes can arrive in either order. So a join keeps an upsert key only when
each side's key contains that side's join key (a row's changes stay with one join key). The sink
is keyed by the upsert key when there is one, else by the unique key behind the upsert
materializer, which puts changes that arrive out of order right (sink_check.py).

A source's key is its primary key; a Calc keeps a key when it projects every key column
unchanged; an aggregate's key is its group keys (empty for a global aggregate: one row). A window
is identified by its start (or, equally, its end: the size is fixed). A deduplication's key is its
partition key, a Top-N's its partition key and row number. A join of two keyed inputs is keyed by
both keys together, or by one side's alone when the other is unique on its join key (Flink's
rule). UNION ALL has no key (one key can come from two branches).
None means the output has no key: it is a multiset.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
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
    UnionAll,
    WindowAggregate,
    WindowAssign,
)


def run(root: Node, notes: Annotations) -> Annotations:
    upsert: dict[Node, tuple[str, ...] | None] = {}
    unique: dict[Node, tuple[str, ...] | None] = {}
    for node in root.walk():
        upsert[node] = _key(node, upsert, in_order=True)
        unique[node] = _key(node, unique, in_order=False)
    return replace(notes, upsert_keys=frozen(upsert), unique_keys=frozen(unique))


def _key(node: Node, keys: dict, in_order: bool) -> tuple[str, ...] | None:
    if isinstance(node, StagedInput):
        return node.primary_key or None
    if isinstance(node, (WindowAggregate, SessionAggregate)):  # two sessions of a key never overlap
        return (WINDOW_START,) + node.other_keys
    if isinstance(node, GroupAggregate):
        return node.group_keys
    if isinstance(node, WindowAssign):
        key = keys[node.input]
        return None if key is None else key + (WINDOW_START,)
    if isinstance(node, Calc):
        return _through_projection(node, keys[node.input])
    if isinstance(node, (Sink, LookupJoin, OverAggregate)):  # one row out per row in (a lookup: one at most)
        return keys[node.input]
    if isinstance(node, Deduplicate):
        return _ranked_key(node)
    if isinstance(node, Join):
        return _join_key(node, keys[node.left], keys[node.right], in_order)
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


def _ranked_key(node: Deduplicate) -> tuple[str, ...] | None:
    """A deduplication keeps one row per partition key; a Top-N row is its partition key and its
    row number (Flink's Rank with the rank number in its output). None when the ranking subquery
    does not select the partition key."""
    if not {k.lower() for k in node.keys} <= {c.lower() for c in node.selected}:
        return None
    return node.keys + ((node.row_number,) if node.is_top_n else ())


def _join_key(
    join: Join, left: tuple[str, ...] | None, right: tuple[str, ...] | None, in_order: bool
) -> tuple[str, ...] | None:
    """As Flink derives a join's keys: with both inputs keyed, the two keys together identify a
    joined row (a null-padded row too: its missing side's key is NULL); when one side is unique on
    its join key, each row of the other side meets at most one of its rows, so the other side's key
    alone does (inner, and the preserved side of a left or right join). `in_order`: an upsert key,
    which each side's key must contain that side's join key for."""

    def contains(key, join_keys):
        return {k.lower() for k in join_keys} <= {k.lower() for k in key}

    def unique_on_join_key(key, join_keys):
        return {k.lower() for k in key} <= {k.lower() for k in join_keys}

    if join.filters_left:  # a left row or nothing: the left's key, in order if it holds the join key
        return left if left is not None and (not in_order or contains(left, join.left_keys)) else None
    if left is None or right is None:
        return None
    if in_order and not (contains(left, join.left_keys) and contains(right, join.right_keys)):
        return None
    if join.kind in ("inner", "left") and unique_on_join_key(right, join.right_keys):
        return left
    if join.kind in ("inner", "right") and unique_on_join_key(left, join.left_keys):
        return right
    return left + right
