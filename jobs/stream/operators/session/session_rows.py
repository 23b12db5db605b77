"""What session windows make of a key's rows, by Spark's own session_window: the one function both
engines run.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.plan.nodes import SessionAggregate
from jobs.stream.operators.aggregate.grouped_rows import aggregate_call
from jobs.stream.operators.weighted_rows import Difference, Expand, cols


class SessionRows:
    """What session windows make of a key's rows (a frame of rows and their COUNT): its sessions
    by Spark's own session_window, so sessions grow, merge, shrink and split as in the batch
    result. The same for both engines."""

    def __init__(self, node: SessionAggregate):
        self._expand = Expand(node.input.output_names)
        self._session = F.session_window(F.col(f"`{node.window.time_col}`"), node.window.size_sql).alias("__session")
        self._keys = cols(node.group_keys)
        self._aggregates = [aggregate_call(call) for call in node.aggregates]
        self._selected = [
            F.col("__session.start").alias(WINDOW_START),
            F.col("__session.end").alias(WINDOW_END),
            *self._keys,
            *cols(tuple(call.name for call in node.aggregates)),
        ]
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._sessions(after), self._sessions(before))

    def _sessions(self, rows: DataFrame) -> DataFrame:
        grouped = self._expand(rows).groupBy(self._session, *self._keys).agg(*self._aggregates)
        return grouped.select(*self._selected)
