"""Calc (filter + project) on a Spark DataFrame, row by row, carrying the change columns along.

The same code serves the streaming side (before an aggregate) and the finalisation of an
aggregate's output; the expressions are the user's own, regenerated as Spark SQL by sqlglot.
A Calc that only picks columns needs no Spark at all: picked_columns says which (the keyed
operators' driver-side input and output use it).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from jobs.plan.nodes import Calc


def apply_calc(df: DataFrame, calc: Calc, carry: list[str]) -> DataFrame:
    if calc.condition is not None:
        df = df.where(F.expr(calc.condition.sql("spark")))
    return df.select(*[value.alias(name) for name, value in projections(calc)], *carry)


def projections(calc: Calc) -> list[tuple[str, Column]]:
    return [(name, F.expr(expr.sql("spark"))) for name, expr in calc.projections]


def picked_columns(calc: Calc, names: tuple[str, ...], available: tuple[str, ...] | list[str]) -> list[str] | None:
    """For a Calc that only picks (and renames) columns of its input: the input column behind
    each output column of `names`, all among `available`. None when the Calc filters, computes an
    expression, or names a column by its table (work for Spark)."""
    if calc.condition is not None:
        return None
    picked = dict(calc.projections)
    sources = [picked.get(n) for n in names]
    columns = [e for e in sources if isinstance(e, exp.Column) and not e.table and e.name in available]
    if len(columns) < len(sources):
        return None
    return [e.name for e in columns]


def null_safe_equal(left: str, right: str, keys: tuple[str, ...]) -> Column:
    """Join condition on the keys where NULL equals NULL: a NULL group key is a real group."""
    condition = F.lit(True)
    for key in keys:
        condition = condition & F.col(f"{left}.{key}").eqNullSafe(F.col(f"{right}.{key}"))
    return condition
