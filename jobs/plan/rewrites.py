"""SQL that is another query written differently, rewritten into the query the planner plans.
The batch job runs the SQL as the user wrote it: Spark reads these forms itself.

- WITH name AS (query): each table reference to a name becomes its query as a subquery in FROM,
  under the reference's alias (a later name may read an earlier one), and the WITH goes. A name
  read twice is planned twice, as a source read twice is.
- A UNION (distinct) is SELECT DISTINCT over the UNION ALL of its branches.
- INTERSECT and EXCEPT (distinct) are a group aggregate over the UNION ALL of their branches, each
  row marked with its side: a row is in INTERSECT's result while both sides hold it, in EXCEPT's
  while the left holds it and the right does not. GROUP BY treats NULLs as equal, as the set
  operations do. Retractions flow through the aggregate like any other change.
- WINDOW w AS (...): each OVER w is given w's definition.
- SELECT ... ORDER BY c [DESC] LIMIT n (the statement's own, not a subquery's) is a global Top-N,
  as Flink plans it: the SELECT ranked by ROW_NUMBER() OVER (ORDER BY c) with no partition, its
  rows numbered n or less, the row number not selected. The result is the n rows as a table; a
  stream has no order to keep, and the sink's rows come in no particular order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlglot import exp

from jobs.errors import SqlError

Q = TypeVar("Q", bound=exp.Expr)
Where = Callable[[exp.Expr], str]  # where a node is in the spec (file:line:column), for messages

LEFT, RIGHT = "lockstep_in_left", "lockstep_in_right"  # the side marks of INTERSECT and EXCEPT
RANK = "lockstep_rank"  # the row number of ORDER BY ... LIMIT's Top-N


def written_out(statement: exp.Query, where: Where) -> exp.Query:
    """The statement with its CTEs inlined, its distinct set operations rewritten and its
    ORDER BY ... LIMIT ranked."""
    inlined = _named_windows_inlined(_ctes_inlined(statement, where), where)
    return _limit_ranked(_set_operations_rewritten(inlined, where), where)


def _named_windows_inlined(statement: exp.Query, where: Where) -> exp.Query:
    """Each `OVER w` of a SELECT with `WINDOW w AS (...)` given w's definition, and the WINDOW
    clause gone."""
    if not any(select.args.get("windows") for select in statement.find_all(exp.Select)):
        return statement
    statement = statement.copy()
    for select in list(statement.find_all(exp.Select)):
        named = {w.this.name.lower(): w for w in select.args.get("windows") or []}
        if not named:
            continue
        for call in [w for item in select.expressions for w in item.find_all(exp.Window)]:
            name = call.args.get("alias")
            if name is None:
                continue
            if name.name.lower() not in named:
                raise SqlError(f"OVER {name.name}: no WINDOW {name.name} AS (...) in this SELECT", where=where(call))
            definition = named[name.name.lower()]
            for part in ("partition_by", "order", "spec"):
                value = definition.args.get(part)
                call.set(part, [v.copy() for v in value] if isinstance(value, list) else value and value.copy())
            call.set("alias", None)
        select.set("windows", None)
    return statement


def _limit_ranked(statement: exp.Query, where: Where) -> exp.Query:
    limit, order = statement.args.get("limit"), statement.args.get("order")
    if limit is None or not isinstance(statement, exp.Select):
        return statement
    count = limit.expression
    if order is None or not isinstance(count, exp.Literal) or not count.is_int or statement.args.get("offset"):
        raise SqlError(
            "LIMIT is accepted as ORDER BY <column> LIMIT <number> (a Top-N); without ORDER BY the "
            "rows kept would depend on arrival",
            where=where(limit),
        )
    orderings = order.expressions
    if len(orderings) != 1 or not isinstance(orderings[0].this, exp.Column):
        raise SqlError("ORDER BY ... LIMIT orders by one column (ties are broken by the others)", where=where(order))
    names = _named_columns(statement.expressions)
    if names is None:
        raise SqlError("ORDER BY ... LIMIT: name the columns (SELECT a, b ..., not *)", where=where(statement))
    ranked = statement.copy()
    ranked.set("order", None)
    ranked.set("limit", None)
    rank = exp.Window(this=exp.RowNumber(), order=order.copy())
    ranked.append("expressions", exp.alias_(rank, RANK))
    top = exp.select(*names).from_(exp.Subquery(this=ranked, alias=_alias("lockstep_top")))
    return top.where(exp.condition(f"{RANK} <= {count.sql()}"))


def _ctes_inlined(statement: exp.Query, where: Where) -> exp.Query:
    clause = statement.args.get("with_")
    if clause is None:
        return statement
    if clause.args.get("recursive"):
        raise SqlError("unsupported construct: WITH RECURSIVE (not a streaming query)", where=where(clause))
    statement = statement.copy()
    bodies: dict[str, exp.Expr] = {}
    for cte in statement.args["with_"].expressions:
        bodies[cte.alias_or_name.lower()] = _references_inlined(cte.this.copy(), bodies)
    statement.set("with_", None)
    return _references_inlined(statement, bodies)


def _references_inlined(query: Q, bodies: dict[str, exp.Expr]) -> Q:
    for table in list(query.find_all(exp.Table)):
        body = bodies.get(table.name.lower())
        if body is None or table.args.get("db"):
            continue
        table.replace(exp.Subquery(this=body.copy(), alias=_alias(table.alias or table.name)))
    return query


def _set_operations_rewritten(statement: exp.Query, where: Where) -> exp.Query:
    """Innermost first: a rewritten operation is a SELECT over the copies of its branches."""
    statement = statement.copy()
    for operation in statement.find_all(exp.SetOperation):  # (A INTERSECT B) as a branch: A INTERSECT B
        for side in ("this", "expression"):
            branch = operation.args[side]
            while isinstance(branch, exp.Subquery) and not branch.alias:
                branch = branch.this
            operation.set(side, branch)
    while pending := [n for n in statement.find_all(exp.SetOperation) if n.args.get("distinct")]:
        innermost = max(pending, key=_depth)
        rewritten = _distinct_union(innermost) if isinstance(innermost, exp.Union) else _marked_sides(innermost, where)
        if innermost is statement:
            statement = rewritten
        else:
            innermost.replace(rewritten)
    return statement


def _depth(node: exp.Expr) -> int:
    depth = 0
    while node.parent is not None:
        node, depth = node.parent, depth + 1
    return depth


def _distinct_union(union: exp.Union) -> exp.Select:
    every = exp.union(union.this.copy(), union.expression.copy(), distinct=False)
    return exp.select("*").distinct().from_(exp.Subquery(this=every, alias=_alias("lockstep_union")))


def _marked_sides(operation: exp.SetOperation, where: Where) -> exp.Select:
    names = _output_names(operation, where)
    left, right = (
        exp.select(
            "*", exp.alias_(exp.Literal.number(in_left), LEFT), exp.alias_(exp.Literal.number(in_right), RIGHT)
        ).from_(exp.Subquery(this=branch.copy(), alias=_alias(name)))
        for branch, in_left, in_right, name in (
            (operation.this, 1, 0, "lockstep_left"),
            (operation.expression, 0, 1, "lockstep_right"),
        )
    )
    both = exp.union(left, right, distinct=False)
    right_side = "> 0" if isinstance(operation, exp.Intersect) else "= 0"
    having = exp.condition(f"SUM({LEFT}) > 0 AND SUM({RIGHT}) {right_side}")
    return (
        exp.select(*names)
        .from_(exp.Subquery(this=both, alias=_alias("lockstep_sides")))
        .group_by(*names)
        .having(having)
    )


def _output_names(operation: exp.SetOperation, where: Where) -> list[str]:
    """The result's columns: the first branch's, which must name them (no *)."""
    first = operation.this
    while isinstance(first, exp.SetOperation):
        first = first.this
    names = _named_columns(first.expressions) if isinstance(first, exp.Select) else None
    if not names:
        kind = operation.key.upper()
        raise SqlError(
            f"{kind}: name the first branch's columns (SELECT a, b ..., not *): they are the result's",
            where=where(operation),
        )
    return names


def _named_columns(items: list[exp.Expr]) -> list[str] | None:
    """The names of a SELECT's items; None when one is * or has no name."""
    if any(isinstance(item, exp.Star) or item.alias_or_name in ("", "*") for item in items):
        return None
    return [item.alias_or_name for item in items]


def _alias(name: str) -> exp.TableAlias:
    return exp.TableAlias(this=exp.to_identifier(name))
