"""Parse the spec's SQL with sqlglot (Spark dialect) and reject what lockstep cannot run as a stream.

Errors name the YAML line of the construct: the SQL's own line plus the line the `sql:` block
starts on.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from jobs.errors import SqlError, place
from jobs.plan.locate import node_place, parse_error_place, readable, token_error_place
from jobs.plan.rewrites import written_out
from jobs.spec.model import QuerySpec

# A query whose result depends on when or where it runs can never show stream/batch unity.
NON_DETERMINISTIC = (
    "Rand",
    "Randn",
    "Uuid",
    "CurrentDate",
    "CurrentTimestamp",
    "CurrentTime",
    "CurrentDatetime",
    "Localtimestamp",
    "Shuffle",
    "Random",
)
NON_DETERMINISTIC_NAMES = {
    "rand",
    "randn",
    "random",
    "uuid",
    "now",
    "shuffle",
    "current_timestamp",
    "current_date",
    "localtimestamp",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "current_timezone",
}

UNSUPPORTED = {
    exp.Order: (
        "ORDER BY without LIMIT (a stream's result is a table, in no order; Flink SQL sorts a stream "
        "only by its time attribute; ORDER BY <column> LIMIT n is a Top-N)"
    ),
    exp.Limit: "LIMIT inside a subquery (the query's own ORDER BY <column> LIMIT n is a Top-N)",
    exp.Lateral: "LATERAL VIEW",
    exp.With: "WITH inside a subquery (a WITH before the query's SELECT is accepted)",
    exp.Filter: "an aggregate FILTER clause",
    exp.Qualify: "QUALIFY",
    exp.Explode: "EXPLODE",
}


WINDOW = "__window"  # Spark's window(...) and window.start, renamed past sqlglot (see mask_window)
SESSION_WINDOW = "__session_window"  # session_window(...); its .start and .end become __window's


# Planning walks and copies expression trees: a query past this many nodes is refused rather than
# planned for minutes (a spec is planned when Airflow parses the DAG files). About 2,500 terms.
MAX_SQL_NODES = 5_000


def parse_select(spec: QuerySpec) -> exp.Select | exp.Union:
    text = mask_window(spec, spec.sql)
    try:
        statements = [s for s in sqlglot.parse(text, read="spark") if s is not None]
    except sqlglot.errors.ParseError as exc:
        info = (exc.errors or [{}])[0]
        raise SqlError(f"SQL does not parse: {readable(info)}", where=parse_error_place(spec, info, text)) from None
    except sqlglot.errors.TokenError as exc:
        raise SqlError(
            "SQL does not parse: cannot read it as tokens (an unclosed quote or comment?)",
            where=token_error_place(spec, exc, text),
        ) from None
    except RecursionError:
        raise SqlError("the SQL is nested too deep to parse", where=_where(spec, 1)) from None
    if len(statements) != 1:
        raise SqlError(f"expected one SELECT statement, found {len(statements)}", where=_where(spec, 1))
    statement = statements[0]
    size = sum(1 for _ in statement.walk())
    if size > MAX_SQL_NODES:
        raise SqlError(
            f"the query has {size:,} expression nodes; lockstep plans queries of up to {MAX_SQL_NODES:,}",
            where=_where(spec, 1),
        )
    if not isinstance(statement, (exp.Select, exp.SetOperation)):
        raise SqlError(
            f"unsupported statement: {_describe(statement)} (lockstep runs one SELECT)",
            where=where_in_spec(spec, statement),
        )
    statement = written_out(statement, lambda node: where_in_spec(spec, node))
    check_supported(spec, statement)  # an INTERSECT ALL or EXCEPT ALL left is refused here
    assert isinstance(statement, (exp.Select, exp.Union))
    return statement


def mask_window(spec: QuerySpec, sql: str) -> str:
    """Rename Spark's `window(...)` and `window.start` / `window.end` to __window, outside quotes
    (and `session_window(...)` to __session_window, its fields to __window's).

    sqlglot reads WINDOW as the start of a named-window clause, so Spark's window function does
    not parse as written; renamed, it is an ordinary function call and column reference. Lines
    stay where they were, so errors still name the right line.
    """
    out = []
    for quoted, piece in _split_quoted(sql):
        if quoted:
            out.append(piece)
            continue
        piece = re.sub(r"\bsession_window(\s*\()", SESSION_WINDOW + r"\1", piece, flags=re.IGNORECASE)
        piece = re.sub(r"\bsession_window(\s*\.)", WINDOW + r"\1", piece, flags=re.IGNORECASE)
        out.append(re.sub(r"\bwindow(\s*[(.])", WINDOW + r"\1", piece, flags=re.IGNORECASE))
    return "".join(out)


def _split_quoted(sql: str):
    """(is_quoted, text) pieces of the SQL: string literals and quoted identifiers kept whole."""
    for match in re.finditer(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)|([^'\"`]+|['\"`])", sql):
        yield (match.group(1) is not None), match.group(0)


def check_supported(spec: QuerySpec, statement: exp.Expr) -> None:
    for node in statement.walk():
        kind = _unsupported_kind(node)
        if kind:
            raise SqlError(f"unsupported construct: {kind}", where=where_in_spec(spec, node))


def _unsupported_kind(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Order) and isinstance(node.parent, exp.Window):
        return None  # a window function's ORDER BY: judged with the window function
    for cls, name in UNSUPPORTED.items():
        if isinstance(node, cls):
            return name
    if isinstance(node, exp.Window) and not (_is_dedup_row_number(node) or _is_over_call(node)):
        return _window_function_kind(node)
    if isinstance(node, (exp.Intersect, exp.Except)):  # the distinct ones were rewritten (rewrites.py)
        return f"{node.key.upper()} ALL (INTERSECT and EXCEPT, which are distinct, are accepted)"
    return None


def _window_function_kind(window: exp.Window) -> str:
    if isinstance(window.this, exp.Lead):
        return (
            "LEAD (OVER ...): it needs rows after the current one, which a stream has not seen yet; "
            "Flink SQL refuses it in streaming mode too"
        )
    if isinstance(window.this, exp.RowNumber):
        return (
            "ROW_NUMBER() as a window function outside a FROM subquery; lockstep runs it in a FROM "
            "subquery filtered on rn = 1 (deduplication) or rn <= N (Top-N)"
        )
    return (
        f"{window.this.sql('spark')} OVER (...): a window function lockstep does not run; it runs "
        "ROW_NUMBER() in a FROM subquery, and SUM, COUNT, AVG, MIN, MAX and LAG among a SELECT's items "
        "(docs/sql.md)"
    )


OVER_FUNCTIONS = (exp.Sum, exp.Count, exp.Avg, exp.Min, exp.Max, exp.Lag)  # plan/over.py


def _is_over_call(window: exp.Window) -> bool:
    """An OVER aggregation or LAG among a SELECT's items (plan/over.py judges the rest)."""
    item: exp.Expr = window
    while item.parent is not None and not isinstance(item.parent, exp.Select):
        item = item.parent
    select = item.parent
    in_items = isinstance(select, exp.Select) and any(item is e for e in select.expressions)
    return in_items and isinstance(window.this, OVER_FUNCTIONS)


def _is_dedup_row_number(window: exp.Window) -> bool:
    """ROW_NUMBER() OVER (...) as an item of a SELECT that is itself a subquery in FROM."""
    item = window.parent if isinstance(window.parent, exp.Alias) else window
    select = item.parent
    return (
        isinstance(window.this, exp.RowNumber)
        and isinstance(select, exp.Select)
        and isinstance(select.parent, exp.Subquery)
    )


def non_deterministic_calls(spec: QuerySpec, statement: exp.Expression) -> tuple[str, ...]:
    """A warning per non-deterministic call, naming it and its place (file:line:column). Not an
    error: the query runs, and the check attributes the differences it causes to it."""
    return tuple(
        f"{where_in_spec(spec, node)}: non-deterministic function {node.sql('spark')}: its "
        f"result differs between the stream and the batch run, so unity cannot be checked"
        for node in statement.walk()
        if _non_deterministic(node)
    )


def _non_deterministic(node: exp.Expr) -> bool:
    if type(node).__name__ in NON_DETERMINISTIC:
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in NON_DETERMINISTIC_NAMES


def where_in_spec(spec: QuerySpec, node: exp.Expr | None) -> str:
    """file:line:column of the node's first token, with the line and a caret under it."""
    return node_place(spec, node, mask_window(spec, spec.sql))


def _where(spec: QuerySpec, sql_line: int | None) -> str:
    line = spec.sql_line + sql_line - 1 if sql_line else spec.sql_line
    return place(spec.spec_path, line)


def _describe(statement: exp.Expr) -> str:
    return statement.key.upper()


def conjuncts(expr: exp.Expression) -> list[exp.Expression]:
    """The parts of an AND chain (parentheses dropped)."""
    if isinstance(expr, exp.And):
        return conjuncts(expr.this) + conjuncts(expr.expression)
    if isinstance(expr, exp.Paren):
        return conjuncts(expr.this)
    return [expr]
