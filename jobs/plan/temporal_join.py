"""Event-time temporal joins: `JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur`, Flink's
join with a versioned table. sqlglot reads the clause as a table's version (Spark's time-travel
syntax, `TIMESTAMP AS OF` being the other spelling); Spark itself cannot run it with a column.

What the planner accepts is what Flink accepts and runs the same way: an insert-only left side
looked up at its own event time, against a source with a primary key and an event time with a
watermark, joined on exactly that primary key, INNER or LEFT. The batch job runs the same query
as a point-in-time join: the versioned table becomes the view `versions_view(table)`, one row per
version with the time the next version of its key starts, and the join's ON is given the bounds
(`batch_sql`). jobs/changelog/versions.py builds that view from the staged changelog, and
jobs/stream/operators/join/temporal.py runs the join on the stream.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from jobs.changelog.columns import LIVE, VALID_TO
from jobs.errors import SqlError
from jobs.plan.interval_join import event_time_of, insert_only
from jobs.plan.nodes import ChangelogSource, Node, TemporalJoin
from jobs.spec.model import QuerySpec


def versions_view(table: str) -> str:
    """The batch view of a versioned table's history."""
    return f"__versions__{table}"


def version_of(relation: exp.Expression) -> exp.Version | None:
    """The FOR SYSTEM_TIME AS OF clause of a joined table, if it has one."""
    return relation.args.get("version") if isinstance(relation, exp.Table) else None


def temporal_join(
    spec: QuerySpec,
    left: Node,
    right: Node,
    source: ChangelogSource,
    kind: str,
    keys: tuple[tuple[str, ...], tuple[str, ...]],
    output: tuple[str, ...],
    rest: exp.Expression | None,
    at: str,
    where: str,
) -> TemporalJoin:
    """The join node, once every rule Flink's planner applies to a temporal join holds (`at`: the
    left output column the clause names; `source`: the versioned table)."""
    table = source.table
    if kind not in ("inner", "left"):
        raise SqlError("a temporal join is [INNER|LEFT] JOIN <table> FOR SYSTEM_TIME AS OF ...", where=where)
    if not insert_only(left):
        raise SqlError(
            "a temporal join's left side must be insert-only: a retraction would be joined with the "
            "version at its own time, which the watermark may have let go (Flink loses such retractions)",
            where=where,
        )
    left_time = event_time_of(spec, left, output[: len(left.output_names)])
    if at != left_time:
        raise SqlError(
            f"FOR SYSTEM_TIME AS OF names {at}: a temporal join looks the version up at the left "
            f"side's event time ({left_time or 'the left side has none with a watermark'})",
            where=where,
        )
    settings = spec.sources[table]
    if not source.primary_key or settings.event_time is None or settings.watermark_delay is None:
        raise SqlError(
            f"{table} is joined FOR SYSTEM_TIME AS OF: a versioned table needs a primary key and an "
            f"event time with a watermark",
            where=spec.place_of("sources", table),
        )
    left_keys, right_keys = keys
    right_names = output[len(left.output_names) :]
    named = dict(zip(right_names, source.output_names))
    if rest is not None or sorted(named[k] for k in right_keys) != sorted(source.primary_key):
        raise SqlError(
            f"a temporal join's ON equates the primary key of {table} ({', '.join(source.primary_key)}) "
            f"to left columns, and nothing else (other conditions go in WHERE)",
            where=where,
        )
    right_time = right_names[source.output_names.index(settings.event_time)]
    return TemporalJoin(left, right, kind, left_keys, right_keys, output, None, None, at, right_time)


def batch_sql(spec: QuerySpec, statement: exp.Expression) -> str | None:
    """The query as Spark runs it in batch, each temporal join a point-in-time join over its
    table's versions; None when the query has no temporal join."""
    tree = statement.copy()
    joins = [j for j in tree.find_all(exp.Join) if version_of(j.this) is not None]
    for join in joins:
        table = join.this
        at = table.args["version"].expression
        name = next(n for n in spec.sources if n.lower() == table.name.lower())
        alias = table.alias or name
        time = exp.column(spec.sources[name].event_time or "", table=alias, quoted=True)  # the planner checked it
        bounds = sqlglot.parse_one(
            f"{time.sql('spark')} <= {at.sql('spark')} AND ({_hidden(alias, VALID_TO)} IS NULL "
            f"OR {at.sql('spark')} < {_hidden(alias, VALID_TO)}) AND {_hidden(alias, LIVE)}",
            read="spark",
        )
        table.set("version", None)
        table.set("this", exp.to_identifier(versions_view(name), quoted=True))
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
        join.set("on", exp.and_(join.args["on"], bounds))
    return tree.sql("spark") if joins else None


def _hidden(alias: str, column: str) -> str:
    return exp.column(column, table=alias, quoted=True).sql("spark")
