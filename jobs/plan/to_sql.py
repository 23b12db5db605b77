"""A plan subtree as Spark SQL over the source tables: the batch equivalent of a stage.

The final result's batch side runs the user's own SQL; an intermediate stage (the table a
deduplication or a join feeds to the next stateful operator) has no SQL of its own, so it is
printed from its plan. It also gives the stage table's column types (the SQL run on empty inputs).
"""

from __future__ import annotations

from sqlglot import exp

from jobs.changelog.columns import LIVE, VALID_TO, WINDOW_END, WINDOW_START
from jobs.plan.nodes import (
    Calc,
    ChangelogSource,
    Deduplicate,
    GroupAggregate,
    Join,
    LookupJoin,
    Node,
    OverAggregate,
    SessionAggregate,
    StageInput,
    TemporalJoin,
    UnionAll,
    WindowAggregate,
    WindowAssign,
)
from jobs.plan.temporal_join import versions_view


def to_sql(node: Node) -> str:
    if isinstance(node, (ChangelogSource, StageInput)):
        return f"SELECT {_list(node.output_names)} FROM `{node.table}`"
    if isinstance(node, Calc):
        items = ", ".join(f"{e.sql('spark')} AS `{n}`" for n, e in node.projections)
        where = f" WHERE {node.condition.sql('spark')}" if node.condition is not None else ""
        return f"SELECT {items} FROM ({to_sql(node.input)}) AS t{where}"
    if isinstance(node, WindowAggregate):
        return _window_aggregate(node)
    if isinstance(node, (WindowAssign, SessionAggregate)):
        raise NotImplementedError(
            "a session window is the query's one operator; a window assignment is its aggregate's"
        )
    if isinstance(node, GroupAggregate):
        calls = [f"{a.sql()} AS `{a.name}`" for a in node.aggregates]
        group = f" GROUP BY {_list(node.group_keys)}" if node.group_keys else ""
        return f"SELECT {', '.join(list(map(_quote, node.group_keys)) + calls)} FROM ({to_sql(node.input)}) AS t{group}"
    if isinstance(node, Deduplicate):
        return _dedup(node)
    if isinstance(node, OverAggregate):
        windowed = ", ".join(f"{call.sql('spark')} AS {_quote(name)}" for name, call in node.calls)
        return f"SELECT *, {windowed} FROM ({to_sql(node.input)}) AS t"
    if isinstance(node, TemporalJoin):
        return _temporal_join(node)
    if isinstance(node, Join):
        return _join(node)
    if isinstance(node, LookupJoin):
        return _lookup_join(node)
    if isinstance(node, UnionAll):
        return " UNION ALL ".join(f"SELECT * FROM ({to_sql(b)}) AS t" for b in node.branches)
    raise TypeError(f"no SQL for {type(node).__name__}")


def _dedup(node: Deduplicate) -> str:
    direction = "DESC" if node.descending else "ASC"
    order = ", ".join(f"{_quote(n)} {direction}" for n in node.ordering)
    ranked = (
        f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {_list(node.keys)} ORDER BY {order}) AS __rn "
        f"FROM ({to_sql(node.input)}) AS t"
    )
    return (
        f"SELECT {_list(node.selected)}, __rn AS {_quote(node.row_number)} FROM ({ranked}) AS r "
        f"WHERE __rn <= {node.limit}"
    )


def _join(node: Join) -> str:
    left_names, right_names = node.left.output_names, node.right.output_names
    items = [f"l.{_quote(n)} AS {_quote(n)}" for n in left_names] + [
        f"r.{_quote(n)} AS {_quote(n)}" for n in right_names
    ]
    on = [f"l.{_quote(a)} = r.{_quote(b)}" for a, b in zip(node.left_keys, node.right_keys)]
    condition = join_condition_sql(node)
    if condition is not None:
        on.append(condition)
    kind = {
        "inner": "INNER",
        "left": "LEFT OUTER",
        "right": "RIGHT OUTER",
        "full": "FULL OUTER",
        "semi": "LEFT SEMI",
        "anti": "LEFT ANTI",
    }[node.kind]
    if node.filters_left:
        items = items[: len(left_names)]
    return (
        f"SELECT {', '.join(items)} FROM ({to_sql(node.left)}) AS l {kind} JOIN "
        f"({to_sql(node.right)}) AS r ON {' AND '.join(on)}"
    )


def _window_aggregate(node: WindowAggregate) -> str:
    """A tumbling or hopping window's rows as Spark groups them, its window as __wstart / __wend
    (the late pairs are in: a stage's batch rows show where stream and batch part, see
    jobs/batch/without_late.py for the query's)."""
    assert isinstance(node.input, WindowAssign), "a window aggregate reads its windows from a WindowAssign"
    keys = list(map(_quote, node.other_keys))
    window = [f"window.start AS {_quote(WINDOW_START)}", f"window.end AS {_quote(WINDOW_END)}"]
    calls = [f"{a.sql()} AS `{a.name}`" for a in node.aggregates]
    return (
        f"SELECT {', '.join(window + keys + calls)} FROM ({to_sql(node.input.input)}) AS t "
        f"GROUP BY {', '.join([node.window.spark_sql()] + keys)}"
    )


def _temporal_join(node: TemporalJoin) -> str:
    """A point-in-time join over the versioned table's history view (plan/temporal_join.py)."""
    source = node.versioned_table
    items = [f"l.{_quote(n)} AS {_quote(n)}" for n in node.left.output_names] + [
        f"r.{_quote(n)} AS {_quote(n)}" for n in node.right.output_names
    ]
    versions = ", ".join(f"{_quote(c)} AS {_quote(n)}" for c, n in zip(source.output_names, node.right.output_names))
    at, valid_from = f"l.{_quote(node.left_time)}", f"r.{_quote(node.right_time)}"
    on = [f"l.{_quote(a)} = r.{_quote(b)}" for a, b in zip(node.left_keys, node.right_keys)] + [
        f"{valid_from} <= {at}",
        f"(r.{VALID_TO} IS NULL OR {at} < r.{VALID_TO})",
        f"r.{LIVE}",
    ]
    kind = "INNER" if node.kind == "inner" else "LEFT OUTER"
    return (
        f"SELECT {', '.join(items)} FROM ({to_sql(node.left)}) AS l {kind} JOIN "
        f"(SELECT {versions}, {VALID_TO}, {LIVE} FROM `{versions_view(source.table)}`) AS r ON {' AND '.join(on)}"
    )


def _lookup_join(node: LookupJoin) -> str:
    """The batch side reads the lookup as a table of the same name (see jobs/lookup/tables.py)."""
    items = [f"l.{_quote(n)} AS {_quote(n)}" for n in node.input.output_names] + [
        f"r.{_quote(c)} AS {_quote(n)}" for c, n in zip(node.lookup_columns, node.lookup_output)
    ]
    on = [f"l.{_quote(i)} = r.{_quote(k)}" for i, k in zip(node.input_keys, node.lookup_columns)]
    kind = "INNER" if node.kind == "inner" else "LEFT OUTER"
    return (
        f"SELECT {', '.join(items)} FROM ({to_sql(node.input)}) AS l {kind} JOIN "
        f"`{node.lookup}` AS r ON {' AND '.join(on)}"
    )


def join_condition_sql(node: Join) -> str | None:
    """The join's non-equi condition, if any, with each column qualified by its side: `l` or `r`
    (the aliases both the stage SQL and the stream's join operator give the two inputs)."""
    if node.condition is None:
        return None
    side = {n: "l" for n in node.left.output_names} | {n: "r" for n in node.right.output_names}

    def qualify(column):
        if isinstance(column, exp.Column) and column.name in side:
            return exp.column(column.name, table=side[column.name], quoted=True)
        return column

    return node.condition.copy().transform(qualify).sql("spark")


def _quote(name: str) -> str:
    return f"`{name}`"


def _list(names) -> str:
    return ", ".join(map(_quote, names))
