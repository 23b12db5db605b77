"""Session windows on the local engine: each touched key's live rows read from lockstep's state
(jobs/stream/state), its sessions formed before and after the micro-batch, and the changes that
fall into no open session left out as late (lateness.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, SEQ, WATERMARK, WEIGHT
from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.session.lateness import SessionLateness, record_late
from jobs.stream.operators.session.session_rows import SessionRows
from jobs.stream.operators.weighted_rows import cols
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import live_rows, net_rows


class SessionOperator:
    """Session windows over lockstep's state: each touched key's sessions from its live rows,
    before and after the micro-batch's changes on time (SessionRows)."""

    def __init__(self, node: SessionAggregate, state_dir: Path, late_dir: Path):
        self.node = node
        self.state = LiveState(state_dir / "input", node.group_keys, counted=True)
        self.late_dir = late_dir
        self._values = node.input.output_names
        self._selected = [*cols(self._values), F.col(WEIGHT).cast("bigint").alias(COUNT), F.col(SEQ), F.col(WATERMARK)]
        self._lateness = SessionLateness(node)
        self._sessions = SessionRows(node)

    def held_rows(self) -> int:
        """The rows its state holds now: the report's state figure."""
        return self.state.held_rows()

    def changes(self, spark: SparkSession, delta: DataFrame, batch_id: int) -> DataFrame:
        rows = delta.select(*self._selected).toArrow()
        weighted = rows.select([*self._values, COUNT])
        # No group keys: one key, every session.
        before = self.state.rows_before(batch_id, weighted if self.node.group_keys else None, weighted.schema)
        late = self._lateness.late(rows, before)
        record_late(self.late_dir, batch_id, rows.filter(late).column(SEQ).to_pylist())
        net = net_rows(weighted.filter(pc.invert(late)))
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        return self._sessions.difference(self.state.frame(spark, after), self.state.frame(spark, before))
