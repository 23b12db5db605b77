"""Deduplication and Top-N on the local engine: the touched partitions' live rows read from
lockstep's state (jobs/stream/state), ranked before and after the micro-batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.deduplicate.ranked_rows import TopRows
from jobs.stream.operators.deduplicate.top_rows import ranks_on_driver, top_rows
from jobs.stream.operators.deduplicate.window_expiry import WindowExpiry
from jobs.stream.operators.driver_input import DriverInput, net_changes_on_driver
from jobs.stream.operators.weighted_rows import NetChanges
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import difference, live_rows


class DedupOperator:
    """A deduplication or a Top-N over lockstep's state: the touched partitions ranked before and
    after the micro-batch, on the driver where Arrow orders the rows as Spark does
    (top_rows.py), else by Spark's window (TopRows)."""

    def __init__(self, node: Deduplicate, state_dir: Path, direct: DriverInput | None = None):
        self.node, self.direct = node, direct
        self.expiry = WindowExpiry.of(node)
        fold = self.expiry.fold if self.expiry is not None else None
        self.state = LiveState(state_dir / "input", node.keys, compact_fold=fold, counted=True)
        self._net_changes = NetChanges(node.input.output_names)
        self._ranking = TopRows(node)

    def held_rows(self) -> int:
        """The rows its state holds now: the report's state figure."""
        return self.state.held_rows()

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table | DataFrame:
        """The difference as weighted rows: an Arrow table when ranked on the driver. The
        change rows are `delta`'s, or the `segments` files' when `direct` reads them."""
        if self.expiry is not None:  # a Top-N per window forgets the windows the watermark closed
            self.expiry.advance(segments)
        net = net_changes_on_driver(self.direct, segments)
        if net is None:
            net = self._net_changes(delta)
        before = self.state.rows_before(batch_id, net, net.schema)
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        if ranks_on_driver(self.node, before, after):
            return difference(top_rows(after, self.node), top_rows(before, self.node))
        return self._ranking.difference(self.state.frame(spark, after), self.state.frame(spark, before))
