"""A group (or window) aggregate's streaming rule: on Spark's keyed state when its groups are
recomputed there (the spark engine's MIN/MAX/DISTINCT), on lockstep's own sums, or on Spark's
streaming aggregation with one of Spark's state stores (the frame is then its update output)."""

from __future__ import annotations

from jobs.plan.nodes import GroupAggregate, WindowAggregate, WindowAssign
from jobs.stream.operators.aggregate.group_sums import GroupSums
from jobs.stream.operators.aggregate.on_spark_state import GroupsOnKeyedState, groups_recomputed
from jobs.stream.operators.aggregate.state_store import LOCKSTEP
from jobs.stream.operators.aggregate.streaming import AggregateState, streaming_aggregate
from jobs.stream.operators.driver_input import DriverInput, driver_input
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.window.driver_windows import WindowedInput, windowed_input


def group_aggregate(node: GroupAggregate, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    state = AggregateState.of(node, child.frame)
    if groups_recomputed(ctx.stage, ctx.stage.spec.stream.engine):
        groups = GroupsOnKeyedState(node)
        return Streaming(groups.stream(ctx.spark, child.frame), operator=groups)
    if ctx.store == LOCKSTEP:
        direct: DriverInput | WindowedInput | None = driver_input(node.input, child.frame.schema)
        if direct is None and isinstance(node.input, WindowAssign):
            direct = windowed_input(node.input, child.frame.schema)
        sums = GroupSums(state, ctx.layout.aggregate_state, ctx.stage.spec.stream.ttl, direct)
        return Streaming(child.frame, state, sums=sums)
    return Streaming(streaming_aggregate(child.frame, state), state)


RULES = {GroupAggregate: group_aggregate, WindowAggregate: group_aggregate}
