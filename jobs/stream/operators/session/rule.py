"""A session aggregate's streaming rule: the changes on time (a change behind the watermark is
late, and left to the check's late-events table), with the operator that re-forms the touched
keys' sessions, on Spark's keyed state or lockstep's."""

from __future__ import annotations

from pyspark.sql import functions as F

from jobs.changelog.columns import WATERMARK
from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.session.on_lockstep_state import SessionOperator
from jobs.stream.operators.session.on_spark_state import SessionsOnKeyedState


def session_aggregate(node: SessionAggregate, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    on_time = F.col(WATERMARK).isNull() | (F.col(f"`{node.window.time_col}`") > F.col(WATERMARK))
    if ctx.on_keyed_state:
        sessions = SessionsOnKeyedState(node)
        return Streaming(sessions.stream(ctx.spark, child.frame.where(on_time)), operator=sessions)
    return Streaming(child.frame.where(on_time), operator=SessionOperator(node, ctx.layout.operator_state))


RULES = {SessionAggregate: session_aggregate}
