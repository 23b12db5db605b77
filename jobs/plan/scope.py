"""Which columns a SELECT can name, and what each is called in the plan.

A FROM clause (a source table, a subquery, a chain of joins) gives the SELECT a set of columns,
each reachable by its name and, optionally, its table or alias (`o.price`). Plan nodes know
columns by one flat name; where two joined relations have a column of the same name, the right
one is renamed `<alias>_<name>` in the plan, and the scope keeps the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class ScopeColumn:
    qualifiers: tuple[str, ...]  # the alias and/or table name, lower case, preferred first
    name: str  # as the relation calls it (the output name of `SELECT q.name`)
    plan_name: str  # the column's name in the plan node's output
    spark_type: str | None = None  # known for source columns


class AmbiguousColumn(Exception):
    pass


@dataclass(frozen=True)
class Scope:
    columns: tuple[ScopeColumn, ...]
    aliases: frozenset[str]  # every qualifier a column may carry, lower case

    @classmethod
    def of(cls, qualifiers: tuple[str, ...], names, plan_names=None, types=None) -> Scope:
        """One relation's columns, reachable through any of `qualifiers` (its alias, its table)."""
        plan_names = plan_names or names
        types = types or [None] * len(names)
        lowered = tuple(dict.fromkeys(q.lower() for q in qualifiers if q))
        columns = tuple(ScopeColumn(lowered, n, p, t) for n, p, t in zip(names, plan_names, types))
        return cls(columns, frozenset(lowered))

    def find(self, name: str, qualifier: str = "") -> ScopeColumn | None:
        """The column called `name` (under `qualifier` if given); None if there is none."""
        qualifier = qualifier.lower()
        if qualifier and qualifier not in self.aliases:
            return None
        matches = [
            c for c in self.columns if c.name.lower() == name.lower() and (not qualifier or qualifier in c.qualifiers)
        ]
        if len(matches) > 1:
            raise AmbiguousColumn(name)
        return matches[0] if matches else None

    def resolve(self, column: exp.Column) -> ScopeColumn | None:
        return self.find(column.name, column.table)

    def star(self, qualifier: str = "") -> list[ScopeColumn]:
        qualifier = qualifier.lower()
        return [c for c in self.columns if not qualifier or qualifier in c.qualifiers]

    def joined(self, right: Scope) -> Scope:
        """This scope then `right`'s columns, the right ones renamed where a plan name clashes."""
        taken = {c.plan_name.lower() for c in self.columns}
        renamed = []
        for column in right.columns:
            plan_name = column.plan_name
            if plan_name.lower() in taken:
                plan_name = _free_name(f"{column.qualifiers[0]}_{column.name}", taken)
            taken.add(plan_name.lower())
            renamed.append(ScopeColumn(column.qualifiers, column.name, plan_name, column.spark_type))
        return Scope(self.columns + tuple(renamed), self.aliases | right.aliases)

    @property
    def plan_names(self) -> tuple[str, ...]:
        return tuple(c.plan_name for c in self.columns)


def _free_name(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate
