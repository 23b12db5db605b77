"""Session windows on the spark engine: each key's live rows in Spark's keyed state
(operators/keyed_state.py), its sessions formed again when touched; the keyed state leaves out the
changes that fall into no open session (SessionLateness.java) and hands them back as LATE.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.keyed_state import LATE, PHASE, LiveRowsState, SessionGap
from jobs.stream.operators.session.lateness import record_late
from jobs.stream.operators.session.session_rows import SessionRows


class SessionsOnKeyedState:
    """Session windows: each key's live rows in the keyed state, its sessions formed again when
    touched."""

    def __init__(self, node: SessionAggregate, late_dir: Path):
        self.node = node
        self.late_dir = late_dir
        self.state = LiveRowsState(node.input.output_names)
        self._gap = SessionGap(node.window.time_col, node.window.size // timedelta(microseconds=1))
        self._sessions = SessionRows(node)

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.group_keys] or [F.lit(0)]  # no keys: one key, every session
        return self.state.stream(spark, changes, keys, self._gap)

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        # Late changes are few: their sequence numbers come to the driver for the record.
        late = [row[0] for row in live.where(F.col(PHASE) == LATE).select("__seq").collect()]
        record_late(self.late_dir, batch_id, late)
        before, after = self.state.before_after(live)
        return self._sessions.difference(after, before)
