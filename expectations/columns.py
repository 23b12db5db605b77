"""The sink's columns as the check compares them, and the one rule for comparing floating values.

Floating columns (AVG, SUM over DOUBLE) may differ in the last bits between an incremental and a
one-shot computation: two values are equal when |a - b| <= abs_tol + rel_tol * max(|a|, |b|) (or
both are NULL, or both NaN). The same rule is written once for Spark SQL (the expectations) and
once for Python (the report's side-by-side view), here, next to each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    abs_tol: float
    rel_tol: float

    def sql(self, a: str, b: str) -> str:
        """Spark SQL: a equals b within the tolerance (NULL-safe; NaN equals NaN in Spark)."""
        bound = f"{self.abs_tol!r} + {self.rel_tol!r} * GREATEST(ABS({a}), ABS({b}))"
        return f"(({a} <=> {b}) OR COALESCE(ABS({a} - {b}) <= {bound}, FALSE))"

    def same(self, a, b) -> bool:
        """Python: the same comparison on values read back from Spark."""
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= self.abs_tol + self.rel_tol * max(abs(a), abs(b))


@dataclass(frozen=True)
class Columns:
    """The sink's columns: its primary key, the other columns, and which of those are floating."""

    key: tuple[str, ...]
    values: tuple[str, ...]
    floating: frozenset[str]
    tolerance: Tolerance

    @property
    def all(self) -> tuple[str, ...]:
        return self.key + self.values

    def equal_sql(self, column: str, left: str, right: str) -> str:
        """Spark SQL: `left`.column equals `right`.column as the check compares them."""
        a, b = f"{left}.`{column}`", f"{right}.`{column}`"
        return self.tolerance.sql(a, b) if column in self.floating else f"({a} <=> {b})"

    def same(self, column: str, a, b) -> bool:
        return self.tolerance.same(a, b) if column in self.floating else a == b
