"""Whether each node's updates carry their before-image (Flink's UpdateKind), top-down.

The upsert sink, keyed by the upsert key, needs only the after-image (UA). A stateful operator
needs its input's before-images (UB) to retract what it counted. A node that passes changes
through asks its input for what its own consumer asked of it. A changelog source's format carries
-U rows, so it always provides UB.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.plan.annotations import Annotations, frozen
from jobs.plan.nodes import Node, StagedInput
from jobs.plan.passes.modify_kinds import UPDATE

NONE, ONLY_UPDATE_AFTER, BEFORE_AND_AFTER = "none", "only_update_after", "before_and_after"


def run(root: Node, notes: Annotations) -> Annotations:
    found: dict[Node, str] = {}
    _visit(root, ONLY_UPDATE_AFTER, notes, found)
    return replace(notes, update_kinds=frozen(found))


def _visit(node: Node, required: str, notes: Annotations, found: dict) -> None:
    if UPDATE not in notes.modify_kinds[node]:
        found[node] = NONE
    elif isinstance(node, StagedInput):
        found[node] = BEFORE_AND_AFTER
    else:
        found[node] = required
    for child in node.inputs:
        _visit(child, BEFORE_AND_AFTER if node.stateful else required, notes, found)
