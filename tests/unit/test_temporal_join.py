"""Temporal joins: what the planner accepts and refuses (in one line, as Flink would refuse it or
with the reason lockstep does), the batch's point-in-time SQL, and the versions a changelog leaves
and the version each row is joined with (operators/join/versions.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from jobs.changelog.columns import COUNT, KIND, LIVE, SEQ
from jobs.changelog.kinds import RowKind
from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.plan.nodes import TemporalJoin
from jobs.spec import load_spec
from jobs.stream.operators.join.versions import point_in_time, with_changes
from tests.conftest import write_spec

SPEC = """
name: priced
sql: {sql}
sources:
  orders:
    path: orders
    format: {orders_format}
    schema: "id BIGINT, k BIGINT, ts TIMESTAMP"
    primary_key: [id]
    event_time: ts
    watermark: "2 seconds"
  rates:
    path: rates
    format: changelog-json
    schema: "k BIGINT, rate BIGINT, ts TIMESTAMP"
    primary_key: [{rates_key}]
    event_time: ts
    watermark: "2 seconds"
stream:
  engine: {engine}
"""
JOIN = "SELECT o.id, r.rate FROM orders o {kind} JOIN rates FOR SYSTEM_TIME AS OF {at} AS r ON {on}"


def plan(tmp_path, kind="", at="o.ts", on="o.k = r.k", orders_format="json", rates_key="k", engine="local"):
    sql = JOIN.format(kind=kind, at=at, on=on)
    text = SPEC.format(sql=sql, orders_format=orders_format, rates_key=rates_key, engine=engine)
    return plan_query(load_spec(write_spec(tmp_path, text)))


@pytest.mark.parametrize("kind", ["", "LEFT"])
def test_a_temporal_join_plans_as_one_and_runs_in_batch_as_a_point_in_time_join(tmp_path, kind):
    planned = plan(tmp_path, kind)
    join = next(n for n in planned.root.walk() if isinstance(n, TemporalJoin))
    assert (join.kind, join.left_keys, join.left_time) == ("left" if kind else "inner", ("k",), "ts")
    assert join.right_time == "r_ts" and join.right_keys == ("r_k",)
    assert "TemporalJoin(joinType=[" in explain(planned) and "asOf=[ts], versionTime=[r_ts]" in explain(planned)
    assert "FOR SYSTEM_TIME" not in planned.sql and "`__versions__rates` AS `r`" in planned.sql
    assert "`r`.`ts` <= o.ts AND (`r`.`__valid_to` IS NULL OR o.ts < `r`.`__valid_to`) AND `r`.`__live`" in planned.sql


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kind": "RIGHT"}, r"a temporal join is \[INNER\|LEFT\] JOIN"),
        ({"at": "o.id"}, "looks the version up at the left side's event time"),
        ({"at": "PROCTIME()"}, "FOR SYSTEM_TIME AS OF <left time column>"),
        ({"on": "o.k = r.k AND r.rate > 1"}, "equates the primary key of rates"),
        ({"on": "o.id = r.rate"}, "equates the primary key of rates"),
        ({"orders_format": "changelog-json"}, "left side must be insert-only"),
    ],
)
def test_what_is_not_a_temporal_join_flink_runs_is_refused_in_one_line(tmp_path, change, message):
    with pytest.raises(SqlError, match=message) as refused:
        plan(tmp_path, **change)
    assert "\n" not in refused.value.message


def test_the_spark_engine_plans_a_temporal_join_on_its_keyed_state(tmp_path):
    planned = plan(tmp_path, engine="spark")
    assert any(isinstance(node, TemporalJoin) for node in planned.root.walk())


def _at(second: int) -> datetime:
    return datetime(2026, 11, 21, 9, 0, second, tzinfo=UTC)


HISTORY = pa.schema(
    [
        ("r_k", pa.int64()),
        ("rate", pa.int64()),
        ("r_ts", pa.timestamp("us", "UTC")),
        (LIVE, pa.bool_()),
        (COUNT, pa.int64()),
    ]
)


def _changes(*rows) -> pa.Table:
    kinds = [int(RowKind.from_short(kind)) for kind, *_ in rows]
    return pa.table(
        {
            "r_k": [k for _, k, _, _ in rows],
            "rate": [rate for _, _, rate, _ in rows],
            "r_ts": pa.array([_at(s) for *_, s in rows], pa.timestamp("us", "UTC")),
            KIND: pa.array(kinds, pa.int8()),
            SEQ: pa.array(range(len(rows)), pa.int64()),
        }
    )


def test_versions_are_inserts_and_updates_at_their_time_a_delete_is_one_and_the_later_change_wins():
    history = with_changes(
        HISTORY.empty_table(),
        _changes(
            ("+I", 1, 10, 0),
            ("-U", 1, 10, 0),
            ("+U", 1, 11, 5),
            ("-U", 1, 11, 5),
            ("+U", 1, 12, 5),
            ("+I", 2, 20, 1),
            ("-D", 2, 20, 1),
        ),
        ("r_k",),
        "r_ts",
    )
    rows = sorted((r["r_k"], r["rate"], r["r_ts"].second, r[LIVE]) for r in history.to_pylist())
    assert rows == [(1, 10, 0, True), (1, 12, 5, True), (2, 20, 1, False)]


@pytest.mark.parametrize(
    "kind, expected", [("inner", [(1, 10), (2, 12)]), ("left", [(1, 10), (2, 12), (3, None), (4, None), (5, None)])]
)
def test_a_row_is_joined_with_the_latest_version_at_or_before_its_time(tmp_path, kind, expected):
    join = next(n for n in plan(tmp_path, "LEFT" if kind == "left" else "").root.walk() if isinstance(n, TemporalJoin))
    history = with_changes(
        HISTORY.empty_table(),
        _changes(("+I", 1, 10, 0), ("+U", 1, 12, 5), ("+I", 2, 20, 1), ("-D", 2, 20, 1)),
        ("r_k",),
        "r_ts",
    )
    left = pa.table(
        {
            "id": [1, 2, 3, 4, 5],
            "k": [1, 1, 2, None, 1],
            "ts": pa.array([_at(4), _at(5), _at(9), _at(9), None], pa.timestamp("us", "UTC")),
            COUNT: pa.array([1] * 5, pa.int64()),
        }
    )
    joined = point_in_time(join, left, history)
    assert sorted((r["id"], r["rate"]) for r in joined.to_pylist()) == expected
