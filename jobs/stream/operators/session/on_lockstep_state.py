"""Session windows on the local engine: each touched key's live rows read from lockstep's state
(jobs/stream/state), its sessions formed before and after the micro-batch.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.session.session_rows import SessionRows
from jobs.stream.operators.weighted_rows import NetChanges
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import live_rows


class SessionOperator:
    """Session windows over lockstep's state: each touched key's sessions from its live rows,
    before and after the micro-batch (SessionRows)."""

    def __init__(self, node: SessionAggregate, state_dir: Path):
        self.node = node
        self.state = LiveState(state_dir / "input", node.group_keys)
        self._net_changes = NetChanges(node.input.output_names)
        self._sessions = SessionRows(node)

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        net = self._net_changes(delta)
        # No group keys: one key, every session.
        before = self.state.rows_before(batch_id, net if self.node.group_keys else None, net.schema)
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        return self._sessions.difference(self.state.frame(spark, after), self.state.frame(spark, before))
