"""What a plan node's streaming rule makes and what it is given: a rule turns its node into a
`Streaming` over its inputs' (asked of the `Context`, which finds their rules). The rules of the
stateful operators sit in their folders (`<operator>/rule.py`); jobs/stream/rules.py gathers
them with the stateless ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from jobs.plan import StagePlan
from jobs.plan.nodes import Node
from jobs.runtime.layout import RunLayout
from jobs.stream.operators.aggregate.group_sums import GroupSums
from jobs.stream.operators.aggregate.state_store import LOCKSTEP
from jobs.stream.operators.aggregate.streaming import AggregateState
from jobs.stream.operators.deduplicate.on_lockstep_state import DedupOperator
from jobs.stream.operators.join.on_lockstep_state import JoinOperator
from jobs.stream.operators.join.temporal import TemporalJoinOperator
from jobs.stream.operators.keyed_operators import KeyedStateOperator
from jobs.stream.operators.over.on_lockstep_state import OverOperator
from jobs.stream.operators.session.on_lockstep_state import SessionOperator


@dataclass
class Streaming:
    frame: DataFrame  # what each micro-batch hands to foreachBatch
    state: AggregateState | None = None  # a group aggregate's
    # Recomputes the touched keys per micro-batch: from lockstep's state, or Spark's keyed state.
    operator: (
        DedupOperator | JoinOperator | TemporalJoinOperator | OverOperator | SessionOperator | KeyedStateOperator | None
    ) = None
    sums: GroupSums | None = None  # a group aggregate's state, when lockstep keeps it

    @property
    def spark_aggregation(self) -> bool:
        """The frame is Spark's streaming aggregation (its update output), not the rows."""
        return self.state is not None and self.sums is None


Rule = Callable[..., Streaming]  # (its node, Context): each takes its own node type


@dataclass(frozen=True)
class Context:
    spark: SparkSession
    stage: StagePlan
    layout: RunLayout  # the stage's own folder
    rules: Mapping[type[Node], Rule]
    store: str = LOCKSTEP  # where an aggregate's state is kept (state_store.store_in_effect)

    @property
    def on_keyed_state(self) -> bool:
        """The stage runs on the spark engine: its operator's state is Spark's keyed state."""
        return self.stage.spec.stream.engine == "spark"

    def frame(self, node: Node) -> Streaming:
        """The streaming DataFrame of `node`, up to and including the stage's stateful operator."""
        rule = self.rules.get(type(node))
        if rule is None:
            raise TypeError(f"no streaming rule for {type(node).__name__}")
        return rule(node, self)
