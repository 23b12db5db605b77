"""Weighted rows, the currency of the keyed operators on both engines: a micro-batch's net
changes (NetChanges), each row as many times as its count (Expand), and after - before as
weighted rows (Difference)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT, WEIGHT
from jobs.stream.state.row_counts import net_rows

# Each Column below, and in the operators' *_rows.py functions, is built once per operator and
# reused by every micro-batch: building one is a round trip to the JVM, and a micro-batch of a
# few rows spent more time building its plan (about 150 ms for a deduplication) than running it.


class NetChanges:
    """The micro-batch's rows of `columns`, each with its weight as COUNT, brought to the driver
    by one Spark job; there, per distinct row, the sum of its weights."""

    def __init__(self, columns: tuple[str, ...]):
        self._selected = [*cols(columns), F.col(WEIGHT).cast("bigint").alias(COUNT)]

    def rows(self, delta: DataFrame) -> pa.Table:
        """Every change row, its weight as COUNT (not summed)."""
        return delta.select(*self._selected).toArrow()

    def __call__(self, delta: DataFrame) -> pa.Table:
        return net_rows(self.rows(delta))


class Expand:
    """Each row as many times as its count: what the batch operator sees."""

    def __init__(self, columns: tuple[str, ...]):
        self._copies = F.explode(F.sequence(F.lit(1), F.col(COUNT)))
        self._columns = cols(columns)

    def __call__(self, rows: DataFrame) -> DataFrame:
        return rows.withColumn("__copy", self._copies).select(*self._columns)


class Difference:
    """after - before as weighted rows: weight +n for rows added, -n for rows retracted."""

    def __init__(self, columns: tuple[str, ...]):
        self._rows = cols(columns)
        self._added, self._retracted = [*self._rows, F.lit(1).alias(WEIGHT)], [*self._rows, F.lit(-1).alias(WEIGHT)]
        self._weight = F.sum(WEIGHT).cast("int").alias(WEIGHT)
        self._changed = F.col(WEIGHT) != 0

    def __call__(self, after: DataFrame, before: DataFrame) -> DataFrame:
        both = after.select(*self._added).unionByName(before.select(*self._retracted))
        return both.groupBy(*self._rows).agg(self._weight).where(self._changed)


def cols(names: Iterable[str]) -> list[Column]:
    """The named columns, quoted (a name may hold any character)."""
    return [F.col(f"`{n}`") for n in names]
