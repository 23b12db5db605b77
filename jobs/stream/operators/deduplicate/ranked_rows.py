"""What a deduplication or a Top-N makes of a key's rows, by Spark's window ranking: the one
function both engines run, on rows from their own state.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.plan.nodes import Deduplicate
from jobs.stream.operators.weighted_rows import Difference, Expand, cols


class TopRows:
    """What a deduplication or a Top-N makes of a key's rows (a frame of rows and their COUNT):
    the first `limit` rows of each partition, ranked by ROW_NUMBER() <= limit per key, ties broken
    by the other columns (as the batch SQL of the stage); every copy of a duplicated row ranks on
    its own, as in the batch. The same for both engines: only where the rows come from differs."""

    def __init__(self, node: Deduplicate):
        self.node = node
        self._expand = Expand(node.input.output_names) if node.is_top_n else None
        ordering = [F.col(f"`{c}`").desc() if node.descending else F.col(f"`{c}`").asc() for c in node.ordering]
        self._rank = F.row_number().over(Window.partitionBy(*cols(node.keys)).orderBy(*ordering))
        self._ranked_in = F.col("__rn") <= node.limit
        self._selected = [*cols(node.selected), F.col("__rn").cast("int").alias(node.row_number)]
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._top(after), self._top(before))

    def _top(self, rows: DataFrame) -> DataFrame:
        copies = self._expand(rows) if self._expand else rows
        return copies.withColumn("__rn", self._rank).where(self._ranked_in).select(*self._selected)
