"""Calc (filter + project) on a Spark DataFrame, row by row, carrying the change columns along.

The same code serves the streaming side (before an aggregate) and the finalisation of an
aggregate's output; the expressions are the user's own, regenerated as Spark SQL by sqlglot.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.plan.nodes import Calc


def apply_calc(df: DataFrame, calc: Calc, carry: list[str]) -> DataFrame:
    if calc.condition is not None:
        df = df.where(F.expr(calc.condition.sql("spark")))
    return df.select(*[value.alias(name) for name, value in projections(calc)], *carry)


def projections(calc: Calc) -> list[tuple[str, Column]]:
    return [(name, F.expr(expr.sql("spark"))) for name, expr in calc.projections]


def null_safe_equal(left: str, right: str, keys: tuple[str, ...]) -> Column:
    """Join condition on the keys where NULL equals NULL: a NULL group key is a real group."""
    condition = F.lit(True)
    for key in keys:
        condition = condition & F.col(f"{left}.{key}").eqNullSafe(F.col(f"{right}.{key}"))
    return condition
