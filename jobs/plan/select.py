"""Build the plan of one SELECT over its FROM relation (a node and the scope of its columns).

    SELECT <items> FROM r [WHERE c]                      -> Calc(r)
    SELECT <items> FROM r [WHERE c] GROUP BY k [HAVING h] -> [Calc](GroupAggregate([Calc](r)))

The pre-aggregate Calc computes group keys and aggregate arguments that are expressions; the
post-aggregate Calc applies HAVING and the SELECT expressions. Either is left out when it would
only pass columns through. Column references are resolved through the scope to the plan's
flat column names, so the nodes never see a table qualifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.errors import SqlError
from jobs.plan.event_time import event_times, is_window_time_call, window_time
from jobs.plan.nodes import (
    AggCall,
    Calc,
    ChangelogSource,
    GroupAggregate,
    Node,
    SessionAggregate,
    WindowAggregate,
    WindowAssign,
    WindowSpec,
)
from jobs.plan.over import over_aggregate, over_calls
from jobs.plan.scope import AmbiguousColumn, Scope, ScopeColumn
from jobs.plan.sql import SESSION_WINDOW, WINDOW, where_in_spec
from jobs.spec.intervals import parse_interval
from jobs.spec.model import QuerySpec

RESOLVED = "lockstep_plan_name"  # meta mark of a column already resolved to its plan name
AGGREGATES: dict[type[exp.Expression], str] = {
    exp.Sum: "SUM",
    exp.Count: "COUNT",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
}


def _is_window_call(expr: exp.Expression) -> bool:
    return isinstance(expr, exp.Anonymous) and str(expr.this).lower() in (WINDOW, SESSION_WINDOW)


@dataclass(frozen=True)
class _Windowing:
    """GROUP BY window(...) or session_window(...), with its source's watermark."""

    window: WindowSpec
    watermark: timedelta
    bounded: bool


@dataclass
class SelectBuilder:
    spec: QuerySpec
    select: exp.Select
    input: Node  # the FROM relation's plan
    scope: Scope  # its columns

    def __post_init__(self):
        self._check_columns()
        self.items = self._select_items()

    def build(self) -> Node:
        if over_calls(self.select):
            return self.over()
        return self.aggregate() if self.is_aggregate() else self.projection()

    # -- the two query shapes -------------------------------------------------------------------

    def is_aggregate(self) -> bool:
        has_group = self.select.args.get("group") is not None
        return has_group or bool(self._aggregate_nodes()) or bool(self.select.args.get("distinct"))

    def projection(self) -> Node:
        condition = self._where()
        items = [(name, self._unqualify(e)) for name, e in self.items]
        calls = [d.this for _, e in items for d in e.find_all(exp.Dot) if _is_window_call(d.this)]
        if not calls:
            return Calc(self.input, tuple(items), condition)
        return self._window_rows(items, calls, condition)

    def _window_rows(
        self, items: list[tuple[str, exp.Expression]], calls: list[exp.Expression], condition: exp.Expression | None
    ) -> Node:
        """SELECT window(ts, '1 minute').start AS ws, ... FROM t: each row with its windows (Flink's
        window TVF without an aggregate), for a Top-N per window to rank."""
        where = where_in_spec(self.spec, calls[0])
        if any(self._key(c) != self._key(calls[0]) for c in calls):
            raise SqlError("one window(...) per SELECT", where=where)
        if str(calls[0].this).lower() == SESSION_WINDOW:
            raise SqlError("session_window(...) needs GROUP BY: a session is known only once it closes", where=where)
        windowing = self._windowing(calls[0], {})

        def bounds(node):
            if isinstance(node, exp.Dot) and _is_window_call(node.this):
                return exp.column(self._window_field(exp.column(node.name, table=WINDOW)))
            return node

        assigned = WindowAssign(self.input, windowing.window, windowing.watermark, windowing.bounded)
        return Calc(assigned, tuple((n, e.transform(bounds)) for n, e in items), condition)

    def over(self) -> Node:
        """A SELECT with OVER calls: its WHERE, then the calls (plan/over.py), then its items."""
        if self.is_aggregate():
            raise SqlError(
                "OVER in a SELECT with GROUP BY, DISTINCT or an aggregate: aggregate in a subquery first",
                where=where_in_spec(self.spec, self.select),
            )
        condition = self._where()
        names = self.input.output_names
        input = (
            self.input if condition is None else Calc(self.input, tuple((n, exp.column(n)) for n in names), condition)
        )
        calls: list[tuple[str, exp.Window]] = []

        def lift(node):
            if isinstance(node, exp.Window):
                calls.append((f"__over{len(calls)}", node))
                return exp.column(calls[-1][0])
            return node

        items = [(name, self._unqualify(e).transform(lift)) for name, e in self.items]
        node = over_aggregate(self.spec, input, calls, lambda e: where_in_spec(self.spec, e))
        return Calc(node, tuple(items))

    def aggregate(self) -> Node:
        group_exprs = self._group_expressions()
        window_call = self._window_call(group_exprs)
        group_exprs = [e for e in group_exprs if e is not window_call]
        pre: dict[str, exp.Expression] = {}
        key_names = tuple(self._pre_column(pre, e, f"__g{i}") for i, e in enumerate(group_exprs))
        calls = self._aggregate_calls(pre)
        windowing = self._windowing(window_call, pre) if window_call is not None else None
        condition = self._where()
        trivial_pre = condition is None and all(isinstance(e, exp.Column) and e.name == n for n, e in pre.items())
        agg_input = self.input if trivial_pre else Calc(self.input, tuple(pre.items()), condition)
        aggregate: GroupAggregate | SessionAggregate
        if windowing is None:
            aggregate = GroupAggregate(agg_input, key_names, tuple(calls.values()))
        elif windowing.window.session:
            aggregate = SessionAggregate(
                agg_input,
                key_names,
                tuple(calls.values()),
                windowing.window,
                windowing.watermark,
                windowing.bounded,
                self.spec.sink.emit or "final",
            )
        else:
            assigned = WindowAssign(agg_input, windowing.window, windowing.watermark, windowing.bounded)
            aggregate = WindowAggregate(
                assigned,
                (WINDOW_START, WINDOW_END) + key_names,
                tuple(calls.values()),
                windowing.window,
                self.spec.sink.emit or "final",
            )
        windowed = windowing is not None
        post = [(name, self._rewrite(e, group_exprs, key_names, calls, windowed)) for name, e in self.items]
        having = self._having()
        having = self._rewrite(having, group_exprs, key_names, calls, windowed) if having is not None else None
        if having is None and self._is_passthrough(post, aggregate):
            return aggregate
        return Calc(aggregate, tuple(post), having)

    # -- SELECT items and names -------------------------------------------------------------------

    def _select_items(self) -> list[tuple[str, exp.Expression]]:
        items: list[tuple[str, exp.Expression]] = []
        for item in self.select.expressions:
            star = _star_qualifier(item)
            if star is not None:
                items += [
                    (c.name, exp.column(c.name, table=c.qualifiers[0] if c.qualifiers else None))
                    for c in self.scope.star(star)
                ]
                continue
            items.append((self._output_name(item), item.unalias()))
        seen: set[str] = set()
        for name, _ in items:
            if name.lower() in seen:
                raise SqlError(
                    f"output column {name!r} appears twice; give each a distinct alias",
                    where=where_in_spec(self.spec, self.select),
                )
            seen.add(name.lower())
        return items

    def _output_name(self, item: exp.Expression) -> str:
        if isinstance(item, exp.Alias):
            return item.alias
        if isinstance(item, exp.Column):
            return self._column(item).name
        raise SqlError(
            f"select expression {item.sql('spark')} needs an alias (AS name): it becomes a column of the Delta sink",
            where=where_in_spec(self.spec, item),
        )

    def _check_columns(self) -> None:
        select_aliases = {a.alias.lower() for a in self.select.expressions if isinstance(a, exp.Alias)}
        for column in self._own_columns():
            if isinstance(column.this, exp.Star):
                continue
            bare_window = not column.table and column.name.lower() in (WINDOW, "window") and self._find(column) is None
            if bare_window and is_window_time_call(column.parent):
                group = self.select.args.get("group")
                if group is None or not any(_is_window_call(e) for e in group.expressions):
                    raise SqlError(
                        "window_time(window) needs GROUP BY window(ts, ...)", where=where_in_spec(self.spec, column)
                    )
                continue
            if column.table.lower() == WINDOW or bare_window:
                if bare_window:
                    raise SqlError(
                        "select window.start or window.end, not the window itself",
                        where=where_in_spec(self.spec, column),
                    )
                continue
            if column.table and column.table.lower() not in self.scope.aliases:
                raise SqlError(
                    f"unknown table or alias {column.table!r} in {column.sql('spark')}",
                    where=where_in_spec(self.spec, column),
                )
            if self._find(column) is None and not (
                self._in_group_or_having(column) and column.name.lower() in select_aliases
            ):
                known = ", ".join(c.name for c in self.scope.columns)
                raise SqlError(
                    f"unknown column '{column.sql('spark')}' (columns in scope: {known})",
                    where=where_in_spec(self.spec, column),
                )

    def _own_columns(self):
        """The column references of this SELECT, not those inside its FROM clause."""
        for key in ("expressions", "where", "group", "having"):
            value = self.select.args.get(key)
            for part in value if isinstance(value, list) else [value] if value is not None else []:
                yield from part.find_all(exp.Column)

    def _find(self, column: exp.Column) -> ScopeColumn | None:
        try:
            return self.scope.resolve(column)
        except AmbiguousColumn:
            raise SqlError(
                f"column {column.name!r} is ambiguous: qualify it with its table or alias",
                where=where_in_spec(self.spec, column),
            ) from None

    def _column(self, column: exp.Column) -> ScopeColumn:
        found = self._find(column)
        if found is None:
            raise SqlError(f"unknown column {column.sql('spark')}", where=where_in_spec(self.spec, column))
        return found

    def _in_group_or_having(self, node: exp.Expression) -> bool:
        return node.find_ancestor(exp.Group, exp.Having) is not None

    def _where(self) -> exp.Expression | None:
        where = self.select.args.get("where")
        if where is None:
            return None
        self._no_aggregates_in(where.this, "WHERE")
        return self._unqualify(where.this)

    def _having(self) -> exp.Expression | None:
        having = self.select.args.get("having")
        return self._resolve_aliases(having.this) if having is not None else None

    # -- aggregates ---------------------------------------------------------------------------------

    def _aggregate_nodes(self) -> list[exp.Expression]:
        scopes = list(self.select.expressions)
        if self.select.args.get("having") is not None:
            scopes.append(self.select.args["having"])
        found = []
        for scope in scopes:
            for node in scope.find_all(exp.AggFunc):
                if node.find_ancestor(exp.Window) is not None:
                    continue  # an OVER aggregation (plan/over.py), not a group's
                self._check_aggregate(node)
                found.append(node)
        return found

    def _check_aggregate(self, node: exp.Expression) -> None:
        if type(node) not in AGGREGATES:
            raise SqlError(
                f"unsupported aggregate function {node.sql('spark')}: lockstep supports "
                f"SUM, COUNT, AVG, MIN, MAX and COUNT(DISTINCT ...)",
                where=where_in_spec(self.spec, node),
            )
        inner = next(node.this.find_all(exp.AggFunc), None) if node.this is not None else None
        if inner is not None:
            raise SqlError(f"nested aggregate {node.sql('spark')}", where=where_in_spec(self.spec, node))

    def _aggregate_calls(self, pre: dict[str, exp.Expression]) -> dict[str, AggCall]:
        calls: dict[str, AggCall] = {}
        aliases = {
            self._key(self._unqualify(a.this)): a.alias
            for a in self.select.expressions
            if isinstance(a, exp.Alias) and type(a.this) in AGGREGATES
        }
        for node in self._aggregate_nodes():
            key = self._key(self._unqualify(node))
            if key in calls:
                continue
            func, arg, distinct = self._aggregate_parts(node)
            arg_name = None if arg is None else self._pre_column(pre, arg, f"__a{len(calls)}")
            name = aliases.get(key) or f"__agg{len(calls)}"
            calls[key] = AggCall(func, arg_name, distinct, name)
        return calls

    def _aggregate_parts(self, node: exp.Expression) -> tuple[str, exp.Expression | None, bool]:
        func = AGGREGATES[type(node)]
        arg = node.this
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                raise SqlError(
                    f"{node.sql('spark')}: DISTINCT over several columns is not supported",
                    where=where_in_spec(self.spec, node),
                )
            arg = arg.expressions[0]
        if isinstance(arg, exp.Star):
            if func != "COUNT":
                raise SqlError(f"{func}(*) is not valid SQL", where=where_in_spec(self.spec, node))
            return func, None, False
        return func, self._unqualify(arg), distinct

    def _no_aggregates_in(self, node: exp.Expression, clause: str) -> None:
        agg = next(iter(node.find_all(exp.AggFunc)), None)
        if agg is not None:
            raise SqlError(
                f"aggregate {agg.sql('spark')} is not allowed in {clause}", where=where_in_spec(self.spec, agg)
            )

    # -- windows ---------------------------------------------------------------------------------------

    def _window_call(self, group_exprs: list[exp.Expression]) -> exp.Expression | None:
        calls = [e for e in group_exprs if _is_window_call(e)]
        if len(calls) > 1:
            raise SqlError("one window(...) per query", where=where_in_spec(self.spec, calls[1]))
        return calls[0] if calls else None

    def _windowing(self, call: exp.Expression, pre: dict[str, exp.Expression]) -> _Windowing:
        args = call.expressions
        where = where_in_spec(self.spec, call)
        session = str(call.this).lower() == SESSION_WINDOW
        if session and (
            len(args) != 2
            or not isinstance(args[0], exp.Column)
            or not (isinstance(args[1], exp.Literal) and args[1].is_string)
        ):
            raise SqlError(
                "session_window() takes a time column and a gap: session_window(ts, '5 minutes')", where=where
            )
        if (
            not 2 <= len(args) <= 3
            or not isinstance(args[0], exp.Column)
            or not all(isinstance(a, exp.Literal) and a.is_string for a in args[1:])
        ):
            raise SqlError(
                "window() takes a time column and one or two interval strings: "
                "window(ts, '1 minute') or window(ts, '2 minutes', '1 minute')",
                where=where,
            )
        column = self._column(args[0])
        event_time = event_times(self.spec, self.input).get(column.plan_name)
        if type(self.input) is ChangelogSource:
            self._check_source_time(self.input, column.plan_name, where)
        elif session:
            raise SqlError("session_window() applies to a source's event time (FROM <source>)", where=where)
        elif event_time is None:
            raise SqlError(
                f"window over {column.name}: not an event time here. A source's event time is one, "
                f"passed on unchanged by projections, deduplications and Top-Ns, and window_time(window) "
                f"of an earlier window is one, and an interval join keeps them; a regular join or an aggregate "
                f"makes it a plain timestamp (as in Flink)",
                where=where,
            )
        assert event_time is not None, "a source's event time with a watermark is one"
        size_sql = args[1].this
        slide_sql = args[2].this if len(args) == 3 else size_sql
        try:
            size, slide = parse_interval(size_sql), parse_interval(slide_sql)
        except ValueError as exc:
            raise SqlError(f"window(): {exc}", where=where) from None
        if slide > size or size % slide:
            raise SqlError("window(): the slide must divide the size (hopping windows)", where=where)
        self._pre_column(pre, exp.column(column.plan_name), "__t")
        window = WindowSpec(column.plan_name, size, slide, size_sql, slide_sql, session)
        return _Windowing(window, event_time.watermark, event_time.bounded)

    def _check_source_time(self, source: ChangelogSource, name: str, where: str) -> None:
        settings = self.spec.sources[source.table]
        column = source.schema.column(name)
        assert column is not None, "a source's scope holds exactly its schema's columns"
        # The spec gives an event time and a watermark together, or neither.
        if (
            settings.event_time is None
            or settings.watermark_delay is None
            or settings.event_time.lower() != name.lower()
        ):
            raise SqlError(
                f"window over {name} needs sources.{source.table}.event_time: {name} and a watermark", where=where
            )
        if column.spark_type not in ("TIMESTAMP", "TIMESTAMP_NTZ"):
            raise SqlError(f"window over {name}: the column is {column.spark_type}, not a TIMESTAMP", where=where)

    # -- GROUP BY ------------------------------------------------------------------------------------

    def _group_expressions(self) -> list[exp.Expression]:
        group = self.select.args.get("group")
        if group is None and self.select.args.get("distinct"):
            if self._aggregate_nodes():
                raise SqlError(
                    "SELECT DISTINCT with aggregates is not supported", where=where_in_spec(self.spec, self.select)
                )
            return [self._unqualify(e) for _, e in self.items]
        if group is None:
            return []
        exprs = []
        for expr in group.expressions:
            self._no_aggregates_in(expr, "GROUP BY")
            exprs.append(self._unqualify(self._resolve_group_item(expr)))
        return exprs

    def _resolve_group_item(self, expr: exp.Expression) -> exp.Expression:
        if isinstance(expr, exp.Literal) and not expr.is_string:
            position = int(expr.this)
            if not 1 <= position <= len(self.items):
                raise SqlError(
                    f"GROUP BY position {position} is not in the select list", where=where_in_spec(self.spec, expr)
                )
            return self.items[position - 1][1]
        return self._resolve_aliases(expr)

    def _resolve_aliases(self, expr: exp.Expression) -> exp.Expression:
        """Replace references to select aliases that are not source columns (Spark allows them)."""
        by_alias = {name.lower(): e for name, e in self.items}

        def swap(node):
            if (
                isinstance(node, exp.Column)
                and not node.table
                and self._find(node) is None
                and node.name.lower() in by_alias
            ):
                return by_alias[node.name.lower()].copy()
            return node

        return expr.copy().transform(swap)

    # -- rewriting SELECT / HAVING over the aggregate's output ---------------------------------------

    def _pre_column(self, pre: dict[str, exp.Expression], expr: exp.Expression, fallback: str) -> str:
        expr = self._unqualify(expr)
        for name, existing in pre.items():
            if self._key(existing) == self._key(expr):
                return name
        name = expr.name if isinstance(expr, exp.Column) else fallback
        pre[name] = exp.column(name) if isinstance(expr, exp.Column) else expr
        return name

    def _rewrite(
        self,
        expr: exp.Expression,
        group_exprs: list[exp.Expression],
        key_names: tuple[str, ...],
        calls: dict[str, AggCall],
        windowed: bool,
    ) -> exp.Expression:
        groups = {self._key(g): name for g, name in zip(group_exprs, key_names)}

        def swap(node):
            if is_window_time_call(node):
                if not windowed:
                    raise SqlError(
                        "window_time(window) needs GROUP BY window(ts, ...)", where=where_in_spec(self.spec, node)
                    )
                return window_time()
            if isinstance(node, exp.Column) and node.table.lower() == WINDOW:
                if not windowed:
                    raise SqlError(
                        f"window.{node.name} needs GROUP BY window(ts, ...)", where=where_in_spec(self.spec, node)
                    )
                return exp.column(self._window_field(node))
            key = self._key(node) if isinstance(node, exp.Expression) else None
            if key in calls:
                return exp.column(calls[key].name)
            if key in groups:
                return exp.column(groups[key])
            return node

        rewritten = self._unqualify(self._resolve_aliases(expr)).transform(swap)
        allowed = {n.lower() for n in key_names} | {c.name.lower() for c in calls.values()}
        allowed |= {WINDOW_START, WINDOW_END} if windowed else set()
        for column in rewritten.find_all(exp.Column):
            if column.name.lower() not in allowed:
                raise SqlError(
                    f"column {column.name!r} is neither in GROUP BY nor inside an aggregate",
                    where=where_in_spec(self.spec, self._original_column(column.name)),
                )
        return rewritten

    def _window_field(self, column: exp.Column) -> str:
        fields = {"start": WINDOW_START, "end": WINDOW_END}
        if column.name.lower() not in fields:
            raise SqlError(
                f"window.{column.name}: a window has .start and .end", where=where_in_spec(self.spec, column)
            )
        return fields[column.name.lower()]

    def _original_column(self, name: str) -> exp.Expression:
        return next((c for c in self.select.find_all(exp.Column) if c.name == name), self.select)

    def _is_passthrough(self, post: list[tuple[str, exp.Expression]], aggregate: Node) -> bool:
        produced = [e.name if isinstance(e, exp.Column) else None for _, e in post]
        return [n for n, _ in post] == list(aggregate.output_names) == produced

    # -- helpers --------------------------------------------------------------------------------------

    def _unqualify(self, expr: exp.Expression) -> exp.Expression:
        """Every column reference by its plan name (select aliases and window fields stay).
        Idempotent: a column already resolved is marked, so a plan name is never looked up
        again as a user's name (after a join, `g` may be the plan name of `t.g`)."""

        def resolve(node):
            if (
                isinstance(node, exp.Column)
                and node.table.lower() != WINDOW
                and not isinstance(node.this, exp.Star)
                and not node.meta.get(RESOLVED)
            ):
                found = self._find(node)
                if found is not None:
                    column = exp.column(found.plan_name)
                    column.meta[RESOLVED] = True
                    return column
            return node

        return expr.copy().transform(resolve)

    @staticmethod
    def _key(expr: exp.Expression) -> str:
        """A comparison key for expressions: identifiers are case-insensitive in Spark."""
        return normalize_identifiers(expr.copy(), dialect="spark").sql("spark")


def _star_qualifier(item: exp.Expression) -> str | None:
    """'' for SELECT *, 'q' for SELECT q.*, None for anything else."""
    if isinstance(item, exp.Star):
        return ""
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        return item.table
    return None
