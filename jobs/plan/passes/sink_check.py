"""The sink's primary key, and whether the plan can write it as an upsert table as it is.

The Delta sink is written with MERGE by its primary key, each micro-batch applying the net change
per key. That is exact when the sink key is the query's upsert key. When it is not (a sink keyed
by other columns than the group keys, or a query without a key), changes for one sink key can
arrive as a retraction and an insertion of different rows: that needs Flink's upsert
materializer, which lockstep does not have yet, so such a plan is rejected here with the reason.
"""

from __future__ import annotations

from jobs.errors import SqlError
from jobs.plan.nodes import Annotations, Node, Sink


def run(root: Node, notes: Annotations) -> None:
    if not isinstance(root, Sink):
        raise TypeError("a plan's root is its sink")
    upsert_key = notes.upsert_keys[root.input]
    names = {n.lower(): n for n in root.input.output_names}
    if root.primary_key is None and upsert_key is None:
        raise SqlError("the query's output has no unique key, so it cannot be an upsert table: "
                       "select the source's primary key columns, or aggregate with GROUP BY")
    key = upsert_key if root.primary_key is None else _resolve(root.primary_key, names)
    if upsert_key is None or {k.lower() for k in key} != {k.lower() for k in upsert_key}:
        raise SqlError(_materializer_message(key, upsert_key, root.upsert_materialize))
    if root.upsert_materialize == "force":
        raise SqlError("sink.upsert_materialize: force asks for the upsert materializer, which "
                       "lockstep does not have yet; use auto (it is not needed for this query)")
    notes.sink_key.append(tuple(key))


def _resolve(key: tuple[str, ...], names: dict[str, str]) -> tuple[str, ...]:
    missing = [k for k in key if k.lower() not in names]
    if missing:
        raise SqlError(f"sink.primary_key: {', '.join(missing)} not among the query's output "
                       f"columns ({', '.join(names.values())})")
    return tuple(names[k.lower()] for k in key)


def _materializer_message(key, upsert_key, mode: str) -> str:
    found = f"[{', '.join(upsert_key)}]" if upsert_key is not None else "none (a multiset)"
    return (f"sink.primary_key [{', '.join(key)}] is not the query's upsert key {found}: updates for "
            f"one sink key could arrive out of order, which needs the upsert materializer "
            f"(upsert_materialize: {mode}); lockstep does not have it yet, so key the sink by the "
            f"upsert key")
