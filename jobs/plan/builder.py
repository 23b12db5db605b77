"""Build plan nodes from the parsed query: relations first (FROM), then each SELECT over them.

<source table>                                   -> ChangelogSource
(SELECT ...) AS q                                -> the subquery's plan
(SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY c DESC) AS rn FROM t) q ... WHERE rn = 1
                                                 -> Deduplicate(keep last by c)
a [LEFT|RIGHT|FULL] JOIN b ON a.k = b.k [AND ...] -> Join
a [LEFT] JOIN <lookup> ON a.k = <lookup>.key      -> LookupJoin (the spec's lookups:)
a [LEFT] JOIN b FOR SYSTEM_TIME AS OF a.ts ON a.k = b.k
                                                 -> TemporalJoin
SELECT ... UNION ALL SELECT ...                  -> UnionAll
the query                                        -> Sink(...)
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from jobs.changelog.schema import parse_schema
from jobs.errors import SqlError
from jobs.plan.interval_join import time_bounds
from jobs.plan.nodes import (
    Calc,
    ChangelogSource,
    Deduplicate,
    Join,
    LookupJoin,
    Node,
    SessionAggregate,
    Sink,
    UnionAll,
    WindowAggregate,
)
from jobs.plan.scope import AmbiguousColumn, Scope
from jobs.plan.select import SelectBuilder
from jobs.plan.sql import conjuncts, where_in_spec
from jobs.plan.temporal_join import temporal_join, version_of
from jobs.spec.model import QuerySpec

JOIN_KINDS = {"": "inner", "INNER": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}


def build_plan(spec: QuerySpec, statement: exp.Expression) -> Sink:
    body = _Relations(spec).query(statement)
    if spec.sink.emit is not None and not _is_windowed(body):
        raise SqlError(
            "sink.emit applies to windowed queries (GROUP BY window(ts, ...)) only",
            where=where_in_spec(spec, statement),
        )
    sink = spec.sink
    return Sink(body, spec.name, sink.primary_key, sink.upsert_materialize, sink.changelog_mode)


def _is_windowed(body: Node) -> bool:
    windows = (WindowAggregate, SessionAggregate)
    return isinstance(body, windows) or (isinstance(body, Calc) and isinstance(body.input, windows))


class _Relations:
    def __init__(self, spec: QuerySpec):
        self.spec = spec

    def where(self, node: exp.Expr | None) -> str:
        return where_in_spec(self.spec, node)

    # -- queries: SELECT or UNION ALL -------------------------------------------------------------

    def query(self, statement: exp.Expr) -> Node:
        if isinstance(statement, exp.Union):
            return self._union(statement)
        if isinstance(statement, exp.Select):
            return self._select(statement)
        raise SqlError(f"unsupported construct: {statement.key.upper()}", where=self.where(statement))

    def _union(self, union: exp.Union) -> Node:
        assert not union.args.get("distinct"), "a UNION (distinct) is rewritten before planning (rewrites.py)"
        branches = [self.query(b) for b in (union.left, union.right)]
        flat = [n for b in branches for n in (b.branches if isinstance(b, UnionAll) else (b,))]
        names = flat[0].output_names
        for branch in flat[1:]:
            if len(branch.output_names) != len(names):
                raise SqlError(
                    f"UNION ALL branches have {len(names)} and {len(branch.output_names)} columns",
                    where=self.where(union),
                )
        return UnionAll(tuple(self._renamed(b, names) for b in flat))

    @staticmethod
    def _renamed(branch: Node, names: tuple[str, ...]) -> Node:
        """A branch's columns under the first branch's names (UNION ALL matches by position)."""
        if branch.output_names == names:
            return branch
        return Calc(branch, tuple((n, exp.column(o)) for n, o in zip(names, branch.output_names)))

    def _select(self, select: exp.Select) -> Node:
        node, scope = self._from(select)
        if isinstance(node, Deduplicate):
            node, select = self._ranked(select, node)
        node, select = self._subquery_filters(select, node, scope)
        return SelectBuilder(self.spec, select, node, scope).build()

    # -- WHERE ... IN (SELECT ...), [NOT] EXISTS (SELECT ...) -----------------------------------

    def _subquery_filters(self, select: exp.Select, node: Node, scope: Scope) -> tuple[Node, exp.Select]:
        """Each `col IN (SELECT ...)` and `[NOT] EXISTS (SELECT ...)` conjunct of WHERE becomes a
        semi (anti) join of the FROM relation with the subquery, as Flink plans them; the rest of
        WHERE stays the SELECT's filter."""
        where = select.args.get("where")
        if where is None or not any(isinstance(n, (exp.Subquery, exp.Exists)) for n in where.walk()):
            return node, select
        rest = []
        for conjunct in conjuncts(where.this):
            negated = isinstance(conjunct, exp.Not)
            predicate = conjunct.this if negated else conjunct
            if isinstance(predicate, exp.In) and predicate.args.get("query") is not None:
                node = self._in(node, scope, predicate, negated)
            elif isinstance(predicate, exp.Exists):
                node = self._exists(node, scope, predicate, negated)
            elif any(isinstance(n, (exp.Subquery, exp.Exists)) for n in conjunct.walk()):
                raise SqlError(
                    f"unsupported subquery: {conjunct.sql('spark')[:80]} (lockstep runs a subquery as "
                    f"a conjunct of WHERE: col IN (SELECT ...), EXISTS (...) or NOT EXISTS (...))",
                    where=self.where(conjunct),
                )
            else:
                rest.append(conjunct)
        remaining = select.copy()
        remaining.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        return node, remaining

    def _in(self, node: Node, scope: Scope, predicate: exp.In, negated: bool) -> Node:
        if negated:
            raise SqlError(
                "NOT IN (SELECT ...) is not supported: a NULL in the subquery makes every row "
                "unknown, so each row would depend on all of them; write NOT EXISTS (SELECT ... "
                "WHERE inner.col = outer.col), which differs only where NULLs are",
                where=self.where(predicate),
            )
        if not isinstance(predicate.this, exp.Column):
            raise SqlError("IN (SELECT ...) takes a column on its left", where=self.where(predicate))
        right = self.query(predicate.args["query"].this)
        if len(right.output_names) != 1:
            raise SqlError(
                f"the subquery of IN selects {len(right.output_names)} columns, not one", where=self.where(predicate)
            )
        key = self._resolve(predicate.this, scope).plan_name
        return Join(node, right, "semi", (key,), right.output_names, node.output_names)

    def _exists(self, node: Node, scope: Scope, predicate: exp.Exists, negated: bool) -> Node:
        """EXISTS (SELECT ... FROM b WHERE b.k = a.k [AND <b only>]): the correlated equalities are
        the join keys, the rest filters the subquery."""
        sub = predicate.this
        if not isinstance(sub, exp.Select):
            raise SqlError("EXISTS takes a SELECT", where=self.where(predicate))
        _, inner_scope = self._from(sub)
        where = sub.args.get("where")
        outer_keys, inner_keys, inner_only = [], [], []
        for conjunct in conjuncts(where.this) if where is not None else []:
            pair = self._correlation(conjunct, scope, inner_scope)
            if pair is not None:
                outer_keys.append(pair[0])
                inner_keys.append(pair[1])
            elif any(inner_scope.resolve(c) is None for c in conjunct.find_all(exp.Column)):
                raise SqlError(
                    f"EXISTS correlates the subquery with the outer query by equalities only "
                    f"(inner.col = outer.col): {conjunct.sql('spark')[:60]}",
                    where=self.where(conjunct),
                )
            else:
                inner_only.append(conjunct)
        if not outer_keys:
            raise SqlError(
                "EXISTS needs an equality between a column of the subquery and one of the outer "
                "query (an uncorrelated EXISTS is not supported)",
                where=self.where(predicate),
            )
        inner = sub.copy()
        inner.set("expressions", [exp.column(c.name, table=c.table or None) for c in inner_keys])
        inner.set("where", exp.Where(this=exp.and_(*inner_only)) if inner_only else None)
        right = self._select(inner)
        return Join(
            node, right, "anti" if negated else "semi", tuple(outer_keys), right.output_names, node.output_names
        )

    def _correlation(self, conjunct: exp.Expression, outer: Scope, inner: Scope) -> tuple[str, exp.Column] | None:
        """(outer plan name, inner column) of `inner.col = outer.col`, in either order."""
        if not isinstance(conjunct, exp.EQ):
            return None
        sides = [conjunct.this, conjunct.expression]
        if not all(isinstance(s, exp.Column) for s in sides):
            return None
        for inner_side, outer_side in (sides, sides[::-1]):
            if (
                inner.resolve(inner_side) is not None
                and outer.resolve(outer_side) is not None
                and inner.resolve(outer_side) is None
            ):
                return self._resolve(outer_side, outer).plan_name, inner_side
        return None

    # -- FROM -------------------------------------------------------------------------------------

    def _from(self, select: exp.Select) -> tuple[Node, Scope]:
        clause = select.args.get("from_") or select.args.get("from")
        if clause is None:
            raise SqlError("the query reads no table (FROM is missing)", where=self.where(select))
        node, scope = self._relation(clause.this)
        for join in select.args.get("joins") or []:
            node, scope = self._join(node, scope, join)
        return node, scope

    def _relation(self, relation: exp.Expression) -> tuple[Node, Scope]:
        if isinstance(relation, exp.Table):
            return self._table(relation)
        if isinstance(relation, exp.Subquery):
            inner = relation.this
            item = _row_number_item(inner)
            node = self._dedup(inner, item) if item is not None else self.query(inner)
            alias = relation.alias
            return node, Scope.of((alias,), node.output_names)
        raise SqlError(f"unsupported construct in FROM: {relation.sql('spark')[:60]}", where=self.where(relation))

    def _table(self, relation: exp.Table) -> tuple[ChangelogSource, Scope]:
        name = relation.name
        match = next((n for n in self.spec.sources if n.lower() == name.lower()), None)
        if match is None:
            known = ", ".join(self.spec.sources)
            raise SqlError(f"unknown table {name!r} (the spec's sources are: {known})", where=self.where(relation))
        source = self.spec.sources[match]
        schema = parse_schema(source.schema_ddl, where=self.spec.place_of("sources", match, "schema"))
        for key in source.primary_key:
            if schema.column(key) is None:
                raise SqlError(
                    f"primary key column {key!r} is not in the schema of {match}",
                    where=self.spec.place_of("sources", match, "primary_key"),
                )
        if source.event_time is not None and schema.column(source.event_time) is None:
            raise SqlError(
                f"event_time column {source.event_time!r} is not in the schema of {match}",
                where=self.spec.place_of("sources", match, "event_time"),
            )
        node = ChangelogSource(match, schema, source.format, source.primary_key)
        types = [c.spark_type for c in schema.columns]
        return node, Scope.of((relation.alias, match), schema.names, types=types)

    # -- JOIN -------------------------------------------------------------------------------------

    def _join(self, left: Node, left_scope: Scope, join: exp.Join) -> tuple[Node, Scope]:
        kind = JOIN_KINDS.get((join.side or "").upper())
        if kind is None or (join.kind or "").upper() in ("CROSS", "SEMI", "ANTI") or join.args.get("using"):
            raise SqlError(
                f"unsupported join: {join.sql('spark')[:60]} (lockstep runs INNER, LEFT, RIGHT and FULL joins with ON)",
                where=self.where(join),
            )
        version = version_of(join.this)
        if version is not None:
            return self._temporal_join(left, left_scope, join, kind, version)
        lookup = self._lookup_name(join.this.name) if isinstance(join.this, exp.Table) else None
        if lookup:
            return self._lookup_join(left, left_scope, join, kind, lookup)
        right, right_scope = self._relation(join.this)
        scope = left_scope.joined(right_scope)
        on = join.args.get("on")
        if on is None:
            raise SqlError("a join needs ON with an equality between the two sides", where=self.where(join))
        left_keys, right_keys, rest = self._split_on(on, left_scope, scope, len(left.output_names))
        output = scope.plan_names
        right = self._renamed(right, output[len(left.output_names) :])
        bounds = time_bounds(self.spec, left, right, output, rest)
        return Join(left, right, kind, left_keys, right_keys, output, rest, bounds), scope

    def _temporal_join(
        self, left: Node, left_scope: Scope, join: exp.Join, kind: str, version: exp.Version
    ) -> tuple[Node, Scope]:
        """JOIN <source> FOR SYSTEM_TIME AS OF <left time> ON <its key> = ... (plan/temporal_join.py)."""
        on = join.args.get("on")
        if on is None or not isinstance(version.expression, exp.Column):
            raise SqlError(
                "a temporal join is JOIN <table> FOR SYSTEM_TIME AS OF <left time column> ON <key equalities>",
                where=self.where(join),
            )
        source, right_scope = self._table(join.this)
        scope = left_scope.joined(right_scope)
        n_left = len(left.output_names)
        left_keys, right_keys, rest = self._split_on(on, left_scope, scope, n_left)
        output = scope.plan_names
        right = self._renamed(source, output[n_left:])
        at = self._resolve(version.expression, left_scope).plan_name
        keys = (left_keys, right_keys)
        node = temporal_join(self.spec, left, right, source, kind, keys, output, rest, at, self.where(join))
        return node, scope

    def _lookup_name(self, name: str) -> str | None:
        return next((n for n in self.spec.lookups if n.lower() == name.lower()), None)

    def _lookup_join(self, left: Node, left_scope: Scope, join: exp.Join, kind: str, name: str) -> tuple[Node, Scope]:
        """JOIN <lookup> ON input.col = <lookup>.<key> [AND ...] (`name`: the spec's name of the
        lookup): every key column of the lookup equated to an input column, nothing else (the
        service is asked by key)."""
        lookup = self.spec.lookups[name]
        where = f"{self.spec.spec_path}: lookups.{name}.output"
        output = parse_schema(lookup.output, where=where)
        columns = tuple(lookup.key) + output.names
        qualifiers = (join.this.alias, name)
        scope = left_scope.joined(Scope.of(qualifiers, columns))
        on = join.args.get("on")
        if kind not in ("inner", "left") or on is None:
            raise SqlError(
                f"a lookup join is [INNER|LEFT] JOIN {name} ON <input column> = {name}.<key column>",
                where=self.where(join),
            )
        input_keys, lookup_keys, rest = self._split_on(on, left_scope, scope, len(left.output_names))
        lookup_names = dict(zip(scope.plan_names[len(left.output_names) :], columns))
        pairs = {lookup_names[k]: i for i, k in zip(input_keys, lookup_keys)}
        if rest is not None or set(pairs) != set(lookup.key):
            raise SqlError(
                f"a lookup join's ON equates each key column of {name} "
                f"({', '.join(lookup.key)}) to an input column, and nothing else",
                where=self.where(on),
            )
        input_keys = tuple(pairs[k] for k in lookup.key)
        # A key column of the lookup holds the input value it was asked with: the same type.
        types = {c.plan_name: c.spark_type for c in left_scope.columns}
        key_types = [types.get(k) for k in input_keys] + [c.spark_type for c in output.columns]
        scope = left_scope.joined(Scope.of(qualifiers, columns, types=key_types))
        return LookupJoin(left, name, kind, input_keys, columns, scope.plan_names), scope

    def _split_on(self, on: exp.Expression, left_scope: Scope, scope: Scope, n_left: int):
        """ON's equalities between a left and a right column become the join keys; the rest
        stays a condition over the joined row."""
        left_names = set(scope.plan_names[:n_left])
        left_keys, right_keys, rest = [], [], []
        for part in conjuncts(on):
            pair = self._key_pair(part, scope, left_names) if isinstance(part, exp.EQ) else None
            if pair is None:
                rest.append(self._resolved(part, scope))
                continue
            left_keys.append(pair[0])
            right_keys.append(pair[1])
        if not left_keys:
            raise SqlError(
                f"the join condition {on.sql('spark')} has no equality between a column "
                f"of each side (lockstep runs equi-joins)",
                where=self.where(on),
            )
        condition = exp.and_(*rest) if rest else None
        return tuple(left_keys), tuple(right_keys), condition

    def _key_pair(self, eq: exp.EQ, scope: Scope, left_names: set[str]) -> tuple[str, str] | None:
        sides = [eq.this, eq.expression]
        if not all(isinstance(s, exp.Column) for s in sides):
            return None
        names = [self._resolve(s, scope).plan_name for s in sides]
        if names[0] in left_names and names[1] not in left_names:
            return names[0], names[1]
        if names[1] in left_names and names[0] not in left_names:
            return names[1], names[0]
        return None

    def _resolved(self, expr: exp.Expression, scope: Scope) -> exp.Expression:
        def resolve(node):
            if isinstance(node, exp.Column):
                return exp.column(self._resolve(node, scope).plan_name)
            return node

        return expr.copy().transform(resolve)

    def _resolve(self, column: exp.Column, scope: Scope):
        try:
            found = scope.resolve(column)
        except AmbiguousColumn:
            raise SqlError(
                f"column {column.name!r} is ambiguous: qualify it with its table or alias", where=self.where(column)
            ) from None
        if found is None:
            raise SqlError(f"unknown column {column.sql('spark')} in the join condition", where=self.where(column))
        return found

    # -- deduplication ---------------------------------------------------------------------------

    def _dedup(self, inner: exp.Select, item: exp.Expression) -> Deduplicate:
        """The ranking subquery (`item`: its ROW_NUMBER() item): its SELECT without that item,
        plus the partition and ordering columns it ranks by but does not select (kept for the
        ranking only)."""
        window = item.unalias()
        if not isinstance(item, exp.Alias):
            raise SqlError("ROW_NUMBER() OVER (...) needs an alias (AS rn) to filter on", where=self.where(item))
        partition = list(window.args.get("partition_by") or [])
        order = window.args.get("order")
        orderings = order.expressions if order is not None else []
        if len(orderings) != 1 or not isinstance(orderings[0].this, exp.Column):
            raise SqlError(
                "ROW_NUMBER() needs ORDER BY one column (an explicit ordering, never "
                "processing time, so stream and batch keep the same rows)",
                where=self.where(window),
            )
        rest = inner.copy()
        rest.set("expressions", [e for e in inner.expressions if e is not item])
        selected = self._select(rest).output_names
        for column in [*partition, orderings[0].this]:
            if isinstance(column, exp.Column) and column.name.lower() not in {n.lower() for n in selected}:
                rest.append("expressions", exp.column(column.name))
        body = self._select(rest)
        names = {n.lower(): n for n in body.output_names}
        keys = tuple(self._dedup_column(p, names, "PARTITION BY") for p in partition)
        order_col = self._dedup_column(orderings[0].this, names, "ORDER BY")
        keep = "last" if orderings[0].args.get("desc") else "first"
        columns = None if len(body.output_names) == len(selected) else selected
        return Deduplicate(body, keys, order_col, keep, item.alias, columns=columns)

    def _dedup_column(self, column: exp.Expression, names: dict[str, str], clause: str) -> str:
        if not isinstance(column, exp.Column) or column.name.lower() not in names:
            raise SqlError(
                f"ROW_NUMBER() {clause} {column.sql('spark')}: use a column of the subquery's table",
                where=self.where(column),
            )
        return names[column.name.lower()]

    def _ranked(self, select: exp.Select, node: Deduplicate) -> tuple[Deduplicate, exp.Select]:
        """The enclosing query's filter on the row number: rn = 1 (deduplication) or rn <= N,
        rn < N + 1 (Top-N), taken into the operator as its limit; the SELECT keeps the rest of
        its WHERE. Every such conjunct holds for each row the operator emits (its rows rank at
        most the smallest N), so a filter left with only them would compute nothing, and a
        SELECT that only picks columns is finished on the driver (jobs/stream/operators/driver_rows.py)."""
        where = select.args.get("where")
        parts = conjuncts(where.this) if where is not None else []
        limits = [n for n in (_row_number_limit(c, node.row_number) for c in parts) if n is not None]
        if not limits:
            raise SqlError(
                f"ROW_NUMBER() is supported as deduplication or Top-N: filter the subquery with "
                f"WHERE {node.row_number} = 1 or WHERE {node.row_number} <= N",
                where=self.where(select),
            )
        rest = [c for c in parts if _row_number_limit(c, node.row_number) is None]
        remaining = select.copy()
        remaining.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        return replace(node, limit=min(limits)), remaining


def _row_number_item(select: exp.Expression) -> exp.Expression | None:
    if not isinstance(select, exp.Select):
        return None
    for item in select.expressions:
        window = item.unalias()
        if isinstance(window, exp.Window):
            if not isinstance(window.this, exp.RowNumber):
                return None  # the unsupported-construct check names it
            return item
    return None


def _row_number_limit(expr: exp.Expression, name: str) -> int | None:
    """N of rn = 1, rn <= N or rn < N + 1 (the row number on the left, a number on the right)."""
    if not isinstance(expr, (exp.EQ, exp.LTE, exp.LT)):
        return None
    if not (isinstance(expr.this, exp.Column) and isinstance(expr.expression, exp.Literal)):
        return None
    if expr.this.name.lower() != name.lower() or expr.expression.is_string:
        return None
    try:
        bound = int(expr.expression.this)
    except ValueError:
        return None
    if isinstance(expr, exp.EQ):
        return 1 if bound == 1 else None
    limit = bound if isinstance(expr, exp.LTE) else bound - 1
    return limit if limit >= 1 else None
