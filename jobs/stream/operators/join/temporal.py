"""Temporal joins on the local engine: the touched keys' left rows and versions read from lockstep's
state, joined point-in-time before and after the micro-batch (versions.py), the difference
emitted. A left row is joined as soon as it arrives, with the versions known then, and changes
when a version at or before its time comes later; Flink holds it until the watermark passes its
time instead, so its change feed has inserts only. The final rows are the same.

State that ends: the right's changes still to come are on time, after the right's watermark, so a
left row at or before it can no longer change: it leaves the state (its joined row stays in the
sink). Rows still to come on either side are after the join's watermark (the lower of the two),
so of a key's versions at or before it only the latest can still be looked up: the earlier ones
leave. A late row is joined with what is still in state, as Flink joins it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from jobs.changelog.columns import COUNT, KIND, LIVE, SEQ
from jobs.changelog.schema import epoch_micros
from jobs.plan.nodes import TemporalJoin
from jobs.stream.operators.driver_input import DriverInput, net_changes_on_driver
from jobs.stream.operators.join.expiry import forgotten, later, side_watermark, source_of, split_at
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, SIDE, per_side
from jobs.stream.operators.join.on_lockstep_state import touched_keys
from jobs.stream.operators.join.versions import point_in_time, with_changes
from jobs.stream.operators.weighted_rows import NetChanges
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import difference, live_rows, net_rows


class TemporalJoinOperator:
    """A temporal join over lockstep's state: the left's live rows and the versioned table's
    history per key, the touched keys joined point-in-time before and after the micro-batch."""

    def __init__(self, node: TemporalJoin, state_dir: Path, right_schema: StructType, left: DriverInput | None):
        self.node, self.left_direct = node, left
        self.source = node.versioned_table
        self.left_table = source_of(node.left)
        fields = [pa.field(n, to_arrow_type(right_schema[n].dataType, timezone="UTC")) for n in node.right.output_names]
        self.history_schema = pa.schema([*fields, pa.field(LIVE, pa.bool_()), pa.field(COUNT, pa.int64())])
        self.left_mark: int | None = None  # the sides' watermarks, microseconds (they only grow)
        self.right_mark: int | None = None
        self.left_state = LiveState(state_dir / "left", node.left_keys, compact_fold=self._fold_left, counted=True)
        self.versions = LiveState(
            state_dir / "versions", node.right_keys, compact_fold=self._fold_versions, counted=True
        )
        self._net_changes = NetChanges((SIDE, LEFT, RIGHT))

    def held_rows(self) -> int:
        """The rows its state holds now: the report's state figure."""
        return self.left_state.held_rows() + self.versions.held_rows()

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table:
        node = self.node
        left_net = net_changes_on_driver(self.left_direct, segments)
        if left_net is None:
            left_net = per_side(self._net_changes.rows(delta), node.left.output_names, node.right.output_names)[0]
        right_changes = self._right_changes(segments)
        left_touched = touched_keys(left_net, node.left_keys, right_changes, node.right_keys)
        right_touched = touched_keys(right_changes, node.right_keys, left_net, node.left_keys)
        self._advance(segments)
        left_before, left_gone = split_at(
            self.left_state.rows_before(batch_id, left_touched, left_net.schema), node.left_time, self.right_mark
        )
        history_before, versions_gone = self._superseded(
            self.versions.rows_before(batch_id, right_touched, self.history_schema)
        )
        left_after = live_rows(pa.concat_tables([left_before, left_net]))
        history_after = with_changes(history_before, right_changes, node.right_keys, node.right_time)
        self.left_state.record(pa.concat_tables([left_net, forgotten(left_gone)]), batch_id)
        history_log = pa.concat_tables([history_after, forgotten(history_before), forgotten(versions_gone)])
        self.versions.record(net_rows(history_log), batch_id)
        return difference(
            point_in_time(node, left_after, history_after), point_in_time(node, left_before, history_before)
        )

    def _right_changes(self, segments: Mapping[str, Sequence[Path]] | None) -> pa.Table:
        """The micro-batch's changelog rows of the versioned table, in order, with KIND and SEQ."""
        names = self.history_schema.names[:-2]
        files = (segments or {}).get(self.source.table, ())
        schema = pa.schema([*self.history_schema][:-2] + [pa.field(KIND, pa.int8()), pa.field(SEQ, pa.int64())])
        if not files:
            return schema.empty_table()
        columns = [*self.source.output_names, KIND, SEQ]
        read = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
        read = read.rename_columns([*names, KIND, SEQ]).cast(schema)
        return read.take(pc.sort_indices(read, [(SEQ, "ascending")]))

    def _advance(self, segments: Mapping[str, Sequence[Path]] | None) -> None:
        left, right = side_watermark(segments, self.left_table), side_watermark(segments, self.source.table)
        if left is not None:
            self.left_mark = later(self.left_mark, left)
        if right is not None:
            self.right_mark = later(self.right_mark, right)

    def _superseded(self, history: pa.Table) -> tuple[pa.Table, pa.Table]:
        """(versions kept, versions gone): gone when a later version of its key is at or before
        the join's watermark."""
        if self.left_mark is None or self.right_mark is None or history.num_rows == 0:
            return history, history.slice(0, 0)
        cut = min(self.left_mark, self.right_mark)
        keys = list(self.node.right_keys)
        frame = history.select(keys).to_pandas()
        frame["__t"] = epoch_micros(history.column(self.node.right_time)).to_numpy(zero_copy_only=False)
        passed = frame["__t"].where(frame["__t"] <= cut)
        latest_passed = passed.groupby([frame[k] for k in keys], dropna=False).transform("max")
        gone = (passed < latest_passed).to_numpy()
        return history.filter(pa.array(~gone)), history.filter(pa.array(gone))

    def _fold_left(self, rows: pa.Table) -> pa.Table:
        return split_at(live_rows(rows), self.node.left_time, self.right_mark)[0]

    def _fold_versions(self, rows: pa.Table) -> pa.Table:
        return self._superseded(live_rows(rows))[0]
