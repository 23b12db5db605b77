"""Plan node -> streaming DataFrame: one translation rule per plan node type, found by its type.

A stage's streaming query is its plan up to and including its stateful operator, built bottom-up:
each rule turns its node into a frame over its inputs' frames. The stateful operator decides
what a micro-batch does: a group aggregate leaves the frame as the rows and hands its state to the
emitter (operators/aggregate/group_sums.py), or, with one of Spark's state stores, runs on Spark's own streaming
aggregation (its state rides along); a deduplication or a join leaves the frame as the changes and hands an operator to
the emitter, which recomputes the touched keys per micro-batch. A Calc above a stateful
operator is applied per micro-batch by the emitter, not here.

To support a new node type, add its rule to RULES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.columns import KIND, SEQ, WATERMARK, WEIGHT
from jobs.lookup.from_spec import config_of
from jobs.lookup.spark import enrich_stream
from jobs.plan import StagePlan
from jobs.plan.nodes import (
    Calc,
    ChangelogSource,
    Deduplicate,
    GroupAggregate,
    Join,
    LookupJoin,
    Node,
    SessionAggregate,
    StageInput,
    UnionAll,
    WindowAggregate,
    WindowAssign,
)
from jobs.runtime.layout import RunLayout
from jobs.stream.operators.aggregate.group_sums import GroupSums
from jobs.stream.operators.aggregate.on_spark_state import GroupsOnKeyedState, groups_recomputed
from jobs.stream.operators.aggregate.state_store import LOCKSTEP
from jobs.stream.operators.aggregate.streaming import AggregateState, streaming_aggregate
from jobs.stream.operators.calc import apply_calc
from jobs.stream.operators.deduplicate.on_lockstep_state import DedupOperator
from jobs.stream.operators.deduplicate.on_spark_state import DedupOnKeyedState
from jobs.stream.operators.driver_input import DriverInput, driver_input
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, tag_side
from jobs.stream.operators.join.on_lockstep_state import JoinOperator
from jobs.stream.operators.join.on_spark_state import JoinOnKeyedState
from jobs.stream.operators.keyed_operators import KeyedStateOperator
from jobs.stream.operators.session.on_lockstep_state import SessionOperator
from jobs.stream.operators.session.on_spark_state import SessionsOnKeyedState
from jobs.stream.operators.window.driver_windows import WindowedInput, windowed_input
from jobs.stream.operators.window.windows import stream_window_assign
from jobs.stream.source import changelog_stream, staged_input


@dataclass
class Streaming:
    frame: DataFrame  # what each micro-batch hands to foreachBatch
    state: AggregateState | None = None  # a group aggregate's
    # Recomputes the touched keys per micro-batch: from lockstep's state, or Spark's keyed state.
    operator: DedupOperator | JoinOperator | SessionOperator | KeyedStateOperator | None = None
    sums: GroupSums | None = None  # a group aggregate's state, when lockstep keeps it

    @property
    def spark_aggregation(self) -> bool:
        """The frame is Spark's streaming aggregation (its update output), not the rows."""
        return self.state is not None and self.sums is None


@dataclass(frozen=True)
class Context:
    spark: SparkSession
    stage: StagePlan
    layout: RunLayout  # the stage's own folder
    store: str = LOCKSTEP  # where an aggregate's state is kept (state_store.store_in_effect)

    @property
    def on_keyed_state(self) -> bool:
        """The stage runs on the spark engine: its operator's state is Spark's keyed state."""
        return self.stage.spec.stream.engine == "spark"


def streaming_frame(node: Node, ctx: Context) -> Streaming:
    """The streaming DataFrame of `node`, up to and including the stage's stateful operator."""
    rule = RULES.get(type(node))
    if rule is None:
        raise TypeError(f"no streaming rule for {type(node).__name__}")
    return rule(node, ctx)


def _staged_input(node: ChangelogSource | StageInput, ctx: Context) -> Streaming:
    return Streaming(changelog_stream(ctx.spark, staged_input(ctx.layout, node)))


def _calc(node: Calc, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
    if node.input.stateful:
        return child  # applied per micro-batch, to the operator's output (see emitters.py)
    carried = [c for c in (WEIGHT, SEQ, KIND, WATERMARK) if c in child.frame.columns]
    return Streaming(apply_calc(child.frame, node, carried), child.state, sums=child.sums)


def _union_all(node: UnionAll, ctx: Context) -> Streaming:
    frames = [streaming_frame(branch, ctx).frame for branch in node.branches]
    return Streaming(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames))


def _lookup_join(node: LookupJoin, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
    config = config_of(node.lookup, ctx.stage.spec.lookups[node.lookup])
    answers = ctx.layout.lookup_answers(node.lookup, "stream")
    return Streaming(enrich_stream(child.frame, node, config, answers), child.state, sums=child.sums)


def _window_assign(node: WindowAssign, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
    return Streaming(stream_window_assign(child.frame, node), child.state, sums=child.sums)


def _group_aggregate(node: GroupAggregate, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
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


def _deduplicate(node: Deduplicate, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
    if ctx.on_keyed_state:
        dedup = DedupOnKeyedState(node)
        return Streaming(dedup.stream(ctx.spark, child.frame), operator=dedup)
    direct = driver_input(node.input, child.frame.schema)
    return Streaming(child.frame, operator=DedupOperator(node, ctx.layout.operator_state, direct))


def _session_aggregate(node: SessionAggregate, ctx: Context) -> Streaming:
    child = streaming_frame(node.input, ctx)
    on_time = F.col(WATERMARK).isNull() | (F.col(f"`{node.window.time_col}`") > F.col(WATERMARK))
    if ctx.on_keyed_state:
        sessions = SessionsOnKeyedState(node)
        return Streaming(sessions.stream(ctx.spark, child.frame.where(on_time)), operator=sessions)
    return Streaming(child.frame.where(on_time), operator=SessionOperator(node, ctx.layout.operator_state))


def _join(node: Join, ctx: Context) -> Streaming:
    left = streaming_frame(node.left, ctx).frame
    right = streaming_frame(node.right, ctx).frame
    left_names, right_names = node.left.output_names, node.right.output_names
    tagged = tag_side(left, LEFT, left_names, RIGHT, _struct_ddl(right, right_names))
    tagged = tagged.unionByName(tag_side(right, RIGHT, right_names, LEFT, _struct_ddl(left, left_names)))
    if ctx.on_keyed_state:
        types = ({f.name: f.dataType for f in side.schema.fields} for side in (left, right))
        join = JoinOnKeyedState(node, *types)
        return Streaming(join.stream(ctx.spark, tagged), operator=join)
    left_direct, right_direct = driver_input(node.left, left.schema), driver_input(node.right, right.schema)
    direct = (left_direct, right_direct) if left_direct and right_direct else None
    operator = JoinOperator(node, ctx.layout.operator_state, direct)
    return Streaming(tagged, operator=operator)


def _struct_ddl(frame: DataFrame, names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`: {frame.schema[n].dataType.simpleString()}" for n in names)


RULES: dict[type[Node], Callable[..., Streaming]] = {
    ChangelogSource: _staged_input,
    StageInput: _staged_input,
    Calc: _calc,
    UnionAll: _union_all,
    LookupJoin: _lookup_join,
    WindowAssign: _window_assign,
    GroupAggregate: _group_aggregate,
    WindowAggregate: _group_aggregate,
    Deduplicate: _deduplicate,
    SessionAggregate: _session_aggregate,
    Join: _join,
}
