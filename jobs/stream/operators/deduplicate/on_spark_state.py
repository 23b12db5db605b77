"""Deduplication and Top-N on the spark engine: each partition's live rows in Spark's keyed state
(operators/keyed_state.py), ranked again when touched. A Top-N per window forgets a window's
partition once the watermark reaches the window's end, as on the local engine (window_expiry.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.deduplicate.ranked_rows import TopRows
from jobs.stream.operators.deduplicate.window_expiry import WindowExpiry
from jobs.stream.operators.keyed_state import LiveRowsState, RowExpiry, event_micros, watermarked


class DedupOnKeyedState:
    """A deduplication or a Top-N: each partition's live rows in the keyed state."""

    def __init__(self, node: Deduplicate):
        self.node = node
        self.state = LiveRowsState(node.input.output_names)
        self._ranking = TopRows(node)
        window = WindowExpiry.of(node)
        self.window_end = window.window_end if window is not None else None

    def stream(self, spark: SparkSession, changes: DataFrame) -> DataFrame:
        keys = [F.col(f"`{k}`") for k in self.node.keys] or [F.lit(0)]
        if self.window_end is None or (marked := watermarked(changes)) is None:
            return self.state.stream(spark, changes, keys)
        end = event_micros(F.col(f"`{self.window_end}`"), changes.schema[self.window_end].dataType)
        return self.state.stream(spark, marked[0], keys, expiry=RowExpiry(end))

    def changes(self, spark: SparkSession, live: DataFrame, batch_id: int, segments=None) -> DataFrame:
        before, after = self.state.before_after(live)
        return self._ranking.difference(after, before)
