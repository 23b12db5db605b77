"""A session aggregate's streaming rule: every change goes to the operator, which re-forms the
touched keys' sessions and leaves out the changes that fall into no open session (lateness.py),
on Spark's keyed state or lockstep's."""

from __future__ import annotations

from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.session.on_lockstep_state import SessionOperator
from jobs.stream.operators.session.on_spark_state import SessionsOnKeyedState


def session_aggregate(node: SessionAggregate, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    if ctx.on_keyed_state:
        sessions = SessionsOnKeyedState(node, ctx.layout.late_changes)
        return Streaming(sessions.stream(ctx.spark, child.frame), operator=sessions)
    operator = SessionOperator(node, ctx.layout.operator_state, ctx.layout.late_changes)
    return Streaming(child.frame, operator=operator)


RULES = {SessionAggregate: session_aggregate}
