"""A deduplication's (and Top-N's) streaming rule: the changes, with the operator that ranks the
touched keys' live rows, on Spark's keyed state or lockstep's."""

from __future__ import annotations

from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.deduplicate.on_lockstep_state import DedupOperator
from jobs.stream.operators.deduplicate.on_spark_state import DedupOnKeyedState
from jobs.stream.operators.driver_input import driver_input
from jobs.stream.operators.frames import Context, Streaming


def deduplicate(node: Deduplicate, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    if ctx.on_keyed_state:
        dedup = DedupOnKeyedState(node)
        return Streaming(dedup.stream(ctx.spark, child.frame), operator=dedup)
    direct = driver_input(node.input, child.frame.schema)
    return Streaming(child.frame, operator=DedupOperator(node, ctx.layout.operator_state, direct))


RULES = {Deduplicate: deduplicate}
