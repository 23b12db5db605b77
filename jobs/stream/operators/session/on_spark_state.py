"""Session windows on the spark engine: each key's live rows in Spark's keyed state
(operators/keyed_state.py), its sessions formed again when touched.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.keyed_state import LiveRowsState
from jobs.stream.operators.session.session_rows import SessionRows


class SessionsOnKeyedState:
    """Session windows: each key's live rows in the keyed state, its sessions formed again when
    touched."""

    def __init__(self, node: SessionAggregate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._sessions = SessionRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.group_keys] or [F.lit(0)]  # no keys: one key, every session
        return self.state.stream(spark, changes, keys)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._sessions.difference(after, before)
