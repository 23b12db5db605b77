"""A temporal join's rows by Spark, for the spark engine: each left row with the version of its
key whose time is the latest at or before the row's (versions.py does the same on the driver for
the local engine).

A key's versions are kept as rows of its history, one per change of the versioned table: the
right's columns, LIVE (false for a deletion) and SEQ (the later change of a time wins); a -U is
not a version. A superseded version leaves the state once a later one is reached by the watermark
(on_spark_state.py's expiry).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import KIND, LIVE, SEQ, WEIGHT
from jobs.changelog.kinds import RowKind
from jobs.plan.nodes import TemporalJoin
from jobs.stream.operators.weighted_rows import Difference, Expand, cols

ROW = "__row"  # a left row copy's own id, to pick its one version


def history_entries(right: DataFrame, node: TemporalJoin) -> DataFrame:
    """The versioned table's changes as history rows, each added once (weight 1)."""
    versions = right.where(F.col(KIND) != int(RowKind.UPDATE_BEFORE))
    live = (F.col(KIND) != int(RowKind.DELETE)).alias(LIVE)
    return versions.select(*cols(node.right.output_names), live, F.col(SEQ), F.lit(1).alias(WEIGHT))


class PointInTimeRows:
    """What a temporal join makes of a key's left rows and history (frames of rows and their
    COUNT): INNER leaves out a row without a live version, LEFT pads it with NULLs."""

    def __init__(self, node: TemporalJoin):
        self.node = node
        self._expand = Expand(node.left.output_names)
        equal = [F.col(f"`{a}`") == F.col(f"`{b}`") for a, b in zip(node.left_keys, node.right_keys)]
        self._on = reduce(lambda a, b: a & b, equal, F.col(f"`{node.right_time}`") <= F.col(f"`{node.left_time}`"))
        latest = [F.col(f"`{node.right_time}`").desc_nulls_last(), F.col(SEQ).desc_nulls_last()]
        self._rank = F.row_number().over(Window.partitionBy(ROW).orderBy(*latest))
        self._live = F.coalesce(F.col(LIVE), F.lit(False))
        right = [F.when(self._live, F.col(f"`{c}`")).alias(c) for c in node.right.output_names]
        self._selected = [*cols(node.left.output_names), *right]
        self._difference = Difference(node.output)

    def difference(self, after: tuple[DataFrame, DataFrame], before: tuple[DataFrame, DataFrame]) -> DataFrame:
        """after - before, each a (left rows, history rows) pair."""
        return self._difference(self._joined(*after), self._joined(*before))

    def _joined(self, left: DataFrame, history: DataFrame) -> DataFrame:
        rows = self._expand(left).withColumn(ROW, F.monotonically_increasing_id())
        versions = history.select(*cols(self.node.right.output_names), LIVE, SEQ)
        joined = rows.join(versions, self._on, "left").withColumn("__rn", self._rank).where(F.col("__rn") == 1)
        if self.node.kind == "inner":
            joined = joined.where(self._live)
        return joined.select(*self._selected)
