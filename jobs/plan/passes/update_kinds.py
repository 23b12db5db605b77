"""Whether each node's updates carry their before-image (Flink's UpdateKind), top-down.

The upsert sink, keyed by the upsert key, needs only the after-image (UA). A stateful operator
needs its input's before-images (UB) to retract what it counted. A node that passes changes
through asks its input for what its own consumer asked of it. A changelog source's format carries
-U rows, so it always provides UB.
"""

from __future__ import annotations

from jobs.plan.nodes import Annotations, ChangelogSource, Node
from jobs.plan.passes.modify_kinds import UPDATE

NONE, ONLY_UPDATE_AFTER, BEFORE_AND_AFTER = "none", "only_update_after", "before_and_after"


def run(root: Node, notes: Annotations) -> None:
    _visit(root, ONLY_UPDATE_AFTER, notes)


def _visit(node: Node, required: str, notes: Annotations) -> None:
    if UPDATE not in notes.modify_kinds[node]:
        notes.update_kinds[node] = NONE
    elif isinstance(node, ChangelogSource):
        notes.update_kinds[node] = BEFORE_AND_AFTER
    else:
        notes.update_kinds[node] = required
    for child in node.inputs:
        _visit(child, BEFORE_AND_AFTER if node.stateful else required, notes)
