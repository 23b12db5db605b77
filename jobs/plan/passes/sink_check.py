"""Can the sink take what the query emits, and with which key? Decided before anything runs.

- `append` takes inserts only. A query that updates or deletes is rejected, naming the operator
  that first produces those changes (Flink: "... doesn't support consuming update changes which
  is produced by node GroupAggregate(...)").
- `upsert` (the default) is a Delta table MERGEd by its primary key: the sink's `primary_key`,
  or else the query's upsert key. When the primary key is not the upsert key (a sink keyed by a
  column a join shuffles away, or by CONCAT of group keys), changes for one sink key can arrive
  as a retraction and an insertion of different rows; the upsert materializer keeps, per sink
  key, the rows alive and writes the latest. `upsert_materialize`: auto adds it when needed,
  force always, none never (as Flink's table.exec.sink.upsert-materialize).
- `retract` keeps every row with its multiplicity: no key is needed.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.errors import SqlError
from jobs.plan.annotations import Annotations
from jobs.plan.describe import describe_node
from jobs.plan.nodes import GroupAggregate, Node, SessionAggregate, Sink
from jobs.plan.passes.modify_kinds import DELETE, INSERT, UPDATE


def run(root: Node, notes: Annotations) -> Annotations:
    if not isinstance(root, Sink):
        raise TypeError("a plan's root is its sink")
    mode = root.changelog_mode or _default_mode(root, notes)
    if mode == "append":
        _check_append(root, notes)
        return replace(notes, sink_mode=mode, sink_key=notes.upsert_keys[root.input] or ())
    if mode == "retract":
        _check_retract(root)
        return replace(notes, sink_mode=mode, sink_key=())
    key = _upsert_sink_key(root, notes)
    return replace(notes, sink_mode=mode, sink_key=key, materialize=tuple(_materialize_reasons(root, key, notes)))


def _default_mode(root: Sink, notes: Annotations) -> str:
    """Upsert by the sink's primary key or the query's upsert key; without either, a retract sink
    (every row with its copy count), as Flink writes to a sink table without a primary key."""
    keyed = root.primary_key is not None or notes.unique_keys[root.input] is not None
    # An aggregate's rows are its groups: without the group keys in the output there is nothing
    # a copy count could mean, so such a query keeps asking for a key (see _upsert_sink_key).
    return (
        "upsert" if keyed or isinstance(_last_stateful(root.input), (GroupAggregate, SessionAggregate)) else "retract"
    )


def _check_retract(root: Sink) -> None:
    """An aggregate's rows are identified by its group keys: a multiset of them is not what the
    query means, and the stream writes each group's latest row, not its copies."""
    if isinstance(_last_stateful(root.input), (GroupAggregate, SessionAggregate)):
        raise SqlError(
            "sink.changelog_mode: retract is not supported for a query that ends in an "
            "aggregate (its rows are keyed by the group keys: use upsert)"
        )


def _last_stateful(node: Node) -> Node | None:
    """The stateful operator nearest the sink (what the sink's changes come from)."""
    if node.stateful:
        return node
    return next((found for child in node.inputs if (found := _last_stateful(child)) is not None), None)


def _check_append(root: Sink, notes: Annotations) -> None:
    changes = notes.modify_kinds[root.input] - {INSERT}
    if not changes:
        return
    producer = _first_producer(root.input, changes, notes)
    kinds = " and ".join(k for k in (UPDATE, DELETE) if k in changes)
    raise SqlError(
        f"sink.changelog_mode append: table sink '{root.table}' doesn't support consuming "
        f"{kinds} changes which is produced by node {describe_node(producer)}"
    )


def _first_producer(node: Node, changes: frozenset, notes: Annotations) -> Node:
    """The deepest node that emits one of `changes` although none of its inputs does."""
    for child in node.inputs:
        if notes.modify_kinds[child] & changes:
            return _first_producer(child, changes, notes)
    return node


def _upsert_sink_key(root: Sink, notes: Annotations) -> tuple[str, ...]:
    """The sink's primary key, else the query's upsert key, else its unique key (the upsert
    materializer then puts changes that arrive out of order right)."""
    upsert_key = notes.upsert_keys[root.input] or notes.unique_keys[root.input]
    if root.primary_key is None:
        if upsert_key is None:
            raise SqlError(
                "an upsert sink needs a primary key and the query's output has no unique "
                "key: set sink.primary_key (the upsert materializer then keeps it "
                "consistent), or sink.changelog_mode: retract"
            )
        return upsert_key
    names = {n.lower(): n for n in root.input.output_names}
    missing = [k for k in root.primary_key if k.lower() not in names]
    if missing:
        raise SqlError(
            f"sink.primary_key: {', '.join(missing)} not among the query's output columns ({', '.join(names.values())})"
        )
    return tuple(names[k.lower()] for k in root.primary_key)


def _materialize_reasons(root: Sink, key: tuple[str, ...], notes: Annotations) -> list[str]:
    if root.upsert_materialize == "force":
        return ["upsert_materialize: force"]
    if root.upsert_materialize == "none" or notes.modify_kinds[root.input] == {INSERT}:
        return []
    upsert_key = notes.upsert_keys[root.input]
    if upsert_key is None:
        return [f"the query's output has no upsert key, and the sink is keyed by [{', '.join(key)}]"]
    if not {k.lower() for k in upsert_key} <= {k.lower() for k in key}:
        return [f"the sink key [{', '.join(key)}] does not contain the upsert key [{', '.join(upsert_key)}]"]
    return []
