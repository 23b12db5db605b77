"""Group aggregates with MIN, MAX or DISTINCT on the spark engine: each group's live values in
Spark's keyed state (operators/keyed_state.py), the group recomputed when touched.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan import StagePlan
from jobs.plan.nodes import GroupAggregate
from jobs.stream.operators.aggregate.grouped_rows import GroupedRows
from jobs.stream.operators.keyed_state import LiveRowsState


def groups_recomputed(stage: StagePlan, engine: str) -> bool:
    """Whether the stage's aggregate keeps its groups' rows in the keyed state (GroupsOnKeyedState)
    rather than sums in Spark's streaming aggregation, which emits groups, not a difference: for
    MIN / MAX / DISTINCT, and behind the upsert materializer."""
    aggregate = stage.aggregate
    if engine != "spark" or aggregate is None:
        return False
    return stage.materialize or not all(call.invertible for call in aggregate.aggregates)


class GroupsOnKeyedState:
    """A group aggregate with MIN, MAX or DISTINCT (which a retraction cannot subtract): each
    group's live values in the keyed state, the group recomputed when touched."""

    def __init__(self, node: GroupAggregate):
        self.node = node
        read = [c.arg for c in node.aggregates if c.arg is not None and c.arg not in node.group_keys]
        self.state = LiveRowsState(tuple(dict.fromkeys([*node.group_keys, *read])))
        self._groups = GroupedRows(node, self.state.values)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.group_keys] or [F.lit(0)]  # no GROUP BY: one group
        return self.state.stream(spark, changes, keys)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._groups.difference(after, before)
