"""Regular joins on the local engine: the touched keys' rows of both sides read from lockstep's
state (jobs/stream/state), joined before and after the micro-batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.schema import all_nullable
from jobs.plan.nodes import Join
from jobs.plan.window_rows import state_bounds
from jobs.stream.operators.driver_input import DriverInput, net_changes_on_driver
from jobs.stream.operators.join.expiry import IntervalExpiry, forgotten
from jobs.stream.operators.join.join_rows import joined, joins_on_driver
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, SIDE, JoinedRows, per_side
from jobs.stream.operators.weighted_rows import NetChanges
from jobs.stream.state.live_state import LiveState
from jobs.stream.state.row_counts import difference, live_rows


class JoinOperator:
    """A regular join over lockstep's state: the touched keys' rows of both sides joined before
    and after the micro-batch, on the driver where Arrow joins as Spark does (join_rows.py), else
    by Spark (JoinedRows)."""

    def __init__(self, node: Join, state_dir: Path, direct: tuple[DriverInput, DriverInput] | None = None):
        self.node, self.direct = node, direct
        self.left_cols, self.right_cols = node.left.output_names, node.right.output_names
        bounds = state_bounds(node)
        self.expiry = IntervalExpiry(node, bounds) if bounds is not None else None
        folds = (self.expiry.fold_left, self.expiry.fold_right) if self.expiry else (None, None)
        self.left_state = LiveState(state_dir / "left", node.left_keys, compact_fold=folds[0], counted=True)
        self.right_state = LiveState(state_dir / "right", node.right_keys, compact_fold=folds[1], counted=True)
        self._net_changes = NetChanges((SIDE, LEFT, RIGHT))
        self._joined = JoinedRows(node)

    def held_rows(self) -> int:
        """The rows its state holds now: the report's state figure."""
        return self.left_state.held_rows() + self.right_state.held_rows()

    def changes(
        self, spark: SparkSession, delta: DataFrame, batch_id: int, segments: Mapping[str, Sequence[Path]] | None = None
    ) -> pa.Table | DataFrame:
        """The difference as weighted rows: an Arrow table when joined on the driver. The
        change rows are `delta`'s, or the `segments` files' when `direct` reads both sides."""
        node = self.node
        sides = _read_both_on_driver(self.direct, segments)
        if sides is not None:
            left_net, right_net = sides
        else:
            left_net, right_net = per_side(self._net_changes.rows(delta), self.left_cols, self.right_cols)
        # A key is touched when either side's changes carry it: both sides' rows of it are read.
        left_touched = touched_keys(left_net, node.left_keys, right_net, node.right_keys)
        right_touched = touched_keys(right_net, node.right_keys, left_net, node.left_keys)
        left_before = self.left_state.rows_before(batch_id, left_touched, left_net.schema)
        right_before = self.right_state.rows_before(batch_id, right_touched, right_net.schema)
        left_log, right_log = left_net, right_net
        if self.expiry is not None:  # an interval join forgets what no row to come can match
            self.expiry.advance(segments)
            left_before, left_gone = self.expiry.split_left(left_before)
            right_before, right_gone = self.expiry.split_right(right_before)
            left_log = pa.concat_tables([left_net, forgotten(left_gone)])
            right_log = pa.concat_tables([right_net, forgotten(right_gone)])
        left_after = live_rows(pa.concat_tables([left_before, left_net]))
        right_after = live_rows(pa.concat_tables([right_before, right_net]))
        self.left_state.record(left_log, batch_id)
        self.right_state.record(right_log, batch_id)
        if joins_on_driver(node, left_net.schema, right_net.schema):
            return difference(joined(node, left_after, right_after), joined(node, left_before, right_before))
        left, right = self.left_state, self.right_state
        return self._joined.difference(
            (left.frame(spark, left_after), right.frame(spark, right_after)),
            (left.frame(spark, left_before), right.frame(spark, right_before)),
        )


def _read_both_on_driver(
    direct: tuple[DriverInput, DriverInput] | None, segments: Mapping[str, Sequence[Path]] | None
) -> tuple[pa.Table, pa.Table] | None:
    """Both sides' net changes, if `direct` can read each of them from the segment files."""
    if direct is None:
        return None
    left, right = (net_changes_on_driver(d, segments) for d in direct)
    return None if left is None or right is None else (left, right)


def touched_keys(
    own: pa.Table, own_keys: tuple[str, ...], other: pa.Table, other_keys: tuple[str, ...]
) -> pa.Table | None:
    """The join keys either side's net changes carry, under this side's key names: the other
    side's keys are cast to this side's types where they cast; where they do not, they are
    left out of this side's filter, which then reads every live row of this side (a superset,
    never fewer rows than needed)."""
    mine = all_nullable(own.select(list(own_keys)))
    try:
        theirs = pa.table(
            [other.column(o).cast(own.schema.field(m).type) for m, o in zip(own_keys, other_keys)], names=list(own_keys)
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.concat_tables([mine, theirs])
