"""What a group aggregate makes of its groups' rows, by Spark's batch aggregation: the function the
spark engine runs for MIN, MAX and DISTINCT (and session windows for their aggregates).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.plan.nodes import AggCall, GroupAggregate
from jobs.stream.operators.weighted_rows import Difference, Expand, cols


class GroupedRows:
    """What a group aggregate makes of its groups' rows (a frame of `columns` and their COUNT):
    Spark's batch aggregation, one row per group with rows (without GROUP BY one row, as in
    batch SQL)."""

    def __init__(self, node: GroupAggregate, columns: tuple[str, ...]):
        self._expand = Expand(columns)
        self._keys = cols(node.group_keys)
        # GROUP BY without an aggregate call (SELECT DISTINCT-like) still aggregates something.
        self._aggregates = [aggregate_call(call) for call in node.aggregates] or [F.count(F.lit(1)).alias("__rows")]
        self._output = cols(node.output_names)
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self._groups(after), self._groups(before))

    def _groups(self, rows: DataFrame) -> DataFrame:
        return self._expand(rows).groupBy(*self._keys).agg(*self._aggregates).select(*self._output)


def aggregate_call(call: AggCall) -> Column:
    """One aggregate call as Spark computes it in batch."""
    if call.arg is None:
        return F.count(F.lit(1)).alias(call.name)
    arg = F.col(f"`{call.arg}`")
    if call.distinct:
        function = {"COUNT": F.count_distinct, "SUM": F.sum_distinct}.get(call.func)
        if function is not None:
            return function(arg).alias(call.name)
    return {"SUM": F.sum, "COUNT": F.count, "AVG": F.avg, "MIN": F.min, "MAX": F.max}[call.func](arg).alias(call.name)
