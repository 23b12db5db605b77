"""What an OVER aggregation makes of a partition's rows, by Spark's window functions: the one
function both engines run, on rows from their own state."""

from __future__ import annotations

from pyspark.sql import DataFrame

from jobs.plan.nodes import OverAggregate
from jobs.stream.operators.weighted_rows import Difference, Expand


class WindowedRows:
    """Each row of a frame of rows and their COUNT with the node's window calls (every copy of a
    duplicated row on its own, as in the batch), and the difference of two such frames."""

    def __init__(self, node: OverAggregate):
        self._expand = Expand(node.input.output_names)
        self._selected = [f"`{c}`" for c in node.input.output_names] + [
            f"{call.sql('spark')} AS `{name}`" for name, call in node.calls
        ]
        self._difference = Difference(node.output_names)

    def difference(self, after: DataFrame, before: DataFrame) -> DataFrame:
        return self._difference(self.windowed(after), self.windowed(before))

    def windowed(self, rows: DataFrame) -> DataFrame:
        return self._expand(rows).selectExpr(*self._selected)
