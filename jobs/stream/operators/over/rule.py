"""An OVER aggregation's streaming rule: the changes, with the operator that windows the touched
partitions' live rows, on Spark's keyed state or lockstep's."""

from __future__ import annotations

from jobs.plan.nodes import OverAggregate
from jobs.stream.operators.driver_input import driver_input
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.over.on_lockstep_state import OverOperator
from jobs.stream.operators.over.on_spark_state import OverOnKeyedState


def over_aggregate(node: OverAggregate, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    if ctx.on_keyed_state:
        over = OverOnKeyedState(node)
        return Streaming(over.stream(ctx.spark, child.frame), operator=over)
    direct = driver_input(node.input, child.frame.schema)
    return Streaming(child.frame, operator=OverOperator(node, ctx.layout.operator_state, direct))


RULES = {OverAggregate: over_aggregate}
