"""OVER aggregations and LAG on the spark engine: each partition's live rows in Spark's keyed
state (operators/keyed_state.py), windowed again when touched, on the executors."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan.nodes import OverAggregate
from jobs.stream.operators.keyed_state import LiveRowsState
from jobs.stream.operators.over.windowed_rows import WindowedRows


class OverOnKeyedState:
    """An OVER aggregation: each partition's live rows in the keyed state (one key for a window
    without PARTITION BY)."""

    def __init__(self, node: OverAggregate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._windowed = WindowedRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.partition_keys] or [F.lit(0)]
        return self.state.stream(spark, changes, keys)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._windowed.difference(after, before)
