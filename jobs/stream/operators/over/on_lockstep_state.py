"""OVER aggregations and LAG on the local engine: the touched partitions' live rows read from
lockstep's state, each row with its window functions computed by Spark before and after the
micro-batch (windowed_rows.py, shared with the spark engine), the difference emitted.

A row is given its values as soon as it arrives; one that comes later but goes before others in
the window's order changes theirs (Flink, ordered by event time, holds each row until the
watermark passes it and emits it once: the final rows are the same). Every row of a partition is
kept: even a bounded frame's rows stay, as a row that comes late would still need them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.plan.nodes import OverAggregate
from jobs.stream.operators.driver_input import DriverInput, net_changes_on_driver
from jobs.stream.operators.over.windowed_rows import WindowedRows
from jobs.stream.operators.weighted_rows import NetChanges
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import live_rows


class OverOperator:
    def __init__(self, node: OverAggregate, state_dir: Path, direct: DriverInput | None = None):
        self.node, self.direct = node, direct
        self.state = LiveState(state_dir / "input", node.partition_keys, counted=True)
        self._net_changes = NetChanges(node.input.output_names)
        self._windowed = WindowedRows(node)

    def held_rows(self) -> int:
        """The rows its state holds now: the report's state figure."""
        return self.state.held_rows()

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> DataFrame:
        net = net_changes_on_driver(self.direct, segments)
        if net is None:
            net = self._net_changes(delta)
        touched = net if self.node.partition_keys else None  # no partition: one window of every row
        before = self.state.rows_before(batch_id, touched, net.schema)
        after = live_rows(pa.concat_tables([before, net]))
        self.state.record(net, batch_id)
        return self._windowed.difference(self.state.frame(spark, after), self.state.frame(spark, before))
