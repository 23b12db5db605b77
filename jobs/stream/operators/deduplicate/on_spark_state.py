"""Deduplication and Top-N on the spark engine: each partition's live rows in Spark's keyed state
(operators/keyed_state.py), ranked again when touched.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.deduplicate.ranked_rows import TopRows
from jobs.stream.operators.keyed_state import LiveRowsState


class DedupOnKeyedState:
    """A deduplication or a Top-N: each partition's live rows in the keyed state."""

    def __init__(self, node: Deduplicate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._ranking = TopRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        return self.state.stream(spark, changes, [F.col(f"`{k}`") for k in self.node.keys] or [F.lit(0)])

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._ranking.difference(after, before)
