"""Plan node -> streaming DataFrame: one translation rule per plan node type, found by its type.

A stage's streaming query is its plan up to and including its stateful operator, built bottom-up:
each rule turns its node into a frame over its inputs' frames (operators/frames.py). The stateful
operator decides what a micro-batch does: a group aggregate leaves the frame as the rows and hands
its state to the emitter (operators/aggregate/group_sums.py), or, with one of Spark's state stores,
runs on Spark's own streaming aggregation (its state rides along); a deduplication or a join
leaves the frame as the changes and hands an operator to the emitter, which recomputes the
touched keys per micro-batch. A Calc above a stateful operator is applied per micro-batch by the
emitter, not here.

The stateless nodes' rules are here. Each operator's own rules are in its folder
(`operators/<operator>/rule.py`, a RULES mapping of its node types), found when this module is
imported: a new operator adds its folder and its plan node, nothing here.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import reduce

from pyspark.sql import SparkSession

from jobs.changelog.columns import KIND, SEQ, WATERMARK, WEIGHT
from jobs.lookup.from_spec import config_of
from jobs.lookup.spark import enrich_stream
from jobs.plan import StagePlan
from jobs.plan.nodes import Calc, ChangelogSource, LookupJoin, Node, StageInput, UnionAll
from jobs.runtime.layout import RunLayout
from jobs.stream import operators
from jobs.stream.operators.aggregate.state_store import LOCKSTEP
from jobs.stream.operators.calc import apply_calc
from jobs.stream.operators.frames import Context, Rule, Streaming
from jobs.stream.source import changelog_stream, staged_input


def context(spark: SparkSession, stage: StagePlan, layout: RunLayout, store: str = LOCKSTEP) -> Context:
    """What the rules of `stage` are given; `layout`: the stage's own folder."""
    return Context(spark, stage, layout, RULES, store)


def streaming_frame(node: Node, ctx: Context) -> Streaming:
    """The streaming DataFrame of `node`, up to and including the stage's stateful operator."""
    return ctx.frame(node)


def _staged_input(node: ChangelogSource | StageInput, ctx: Context) -> Streaming:
    return Streaming(changelog_stream(ctx.spark, staged_input(ctx.layout, node)))


def _calc(node: Calc, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    if node.input.stateful:
        return child  # applied per micro-batch, to the operator's output (see emitters.py)
    carried = [c for c in (WEIGHT, SEQ, KIND, WATERMARK) if c in child.frame.columns]
    return Streaming(apply_calc(child.frame, node, carried), child.state, sums=child.sums)


def _union_all(node: UnionAll, ctx: Context) -> Streaming:
    frames = [ctx.frame(branch).frame for branch in node.branches]
    return Streaming(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames))


def _lookup_join(node: LookupJoin, ctx: Context) -> Streaming:
    child = ctx.frame(node.input)
    config = config_of(node.lookup, ctx.stage.spec.lookups[node.lookup])
    answers = ctx.layout.lookup_answers(node.lookup, "stream")
    return Streaming(enrich_stream(child.frame, node, config, answers), child.state, sums=child.sums)


def _operators_rules() -> dict[type[Node], Rule]:
    """The RULES of every operator folder that has a rule.py."""
    found: dict[type[Node], Rule] = {}
    for folder in pkgutil.iter_modules(operators.__path__):
        if folder.ispkg and importlib.util.find_spec(f"{operators.__name__}.{folder.name}.rule"):
            found.update(importlib.import_module(f"{operators.__name__}.{folder.name}.rule").RULES)
    return found


RULES: dict[type[Node], Rule] = {
    ChangelogSource: _staged_input,
    StageInput: _staged_input,
    Calc: _calc,
    UnionAll: _union_all,
    LookupJoin: _lookup_join,
    **_operators_rules(),
}
