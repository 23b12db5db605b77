"""What the passes found about a plan, per node: immutable once built.

Each pass (jobs/plan/passes/) takes the plan's root and the annotations earlier passes left and
returns them with its own added; nodes are compared by identity, so they key the maps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from jobs.plan.nodes import Node


@dataclass(frozen=True)
class Annotations:
    modify_kinds: Mapping[Node, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # insert / update / delete
    update_kinds: Mapping[Node, str] = field(
        default_factory=lambda: MappingProxyType({})
    )  # whether updates carry their -U
    upsert_keys: Mapping[Node, tuple[str, ...] | None] = field(
        default_factory=lambda: MappingProxyType({})
    )  # None: no key
    unique_keys: Mapping[Node, tuple[str, ...] | None] = field(default_factory=lambda: MappingProxyType({}))
    sink_mode: str = "upsert"  # append | upsert | retract, as the spec says or the query's key decides
    sink_key: tuple[str, ...] = ()  # the columns the sink is written by (see sink_check)
    materialize: tuple[str, ...] = ()  # why the upsert materializer runs (empty: it does not)


def frozen(per_node: dict) -> Mapping:
    return MappingProxyType(dict(per_node))
