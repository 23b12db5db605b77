"""A window assignment's streaming rule: each change given its windows (tumbling or hopping)."""

from __future__ import annotations

from jobs.plan.nodes import WindowAssign
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.window.windows import stream_window_assign


def window_assign(node: WindowAssign, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    return Streaming(stream_window_assign(child.frame, node), child.state, sums=child.sums)


RULES = {WindowAssign: window_assign}
