import re

import pytest
import yaml

from jobs.errors import SpecError, SqlError
from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.plan.nodes import Calc, GroupAggregate
from jobs.spec import load_spec
from tests.conftest import orders_spec


def plan(tmp_path, sql, **kw):
    return plan_query(load_spec(orders_spec(tmp_path, sql, **kw)))


@pytest.mark.parametrize(
    "sql, message",
    [
        (
            "SELECT pId, SUM(income) AS s FROM orders o JOIN orders p ON o.pId = p.pId GROUP BY pId",
            "'pId' is ambiguous",
        ),
        (
            "SELECT o.pId FROM orders o JOIN orders p ON o.income > p.income",
            "no equality between a column of each side",
        ),
        ("SELECT o.pId FROM orders o CROSS JOIN orders p", "unsupported join"),
        ("SELECT o.pId FROM orders o JOIN orders p USING (pId)", "unsupported join"),
        ("SELECT order_id, ROW_NUMBER() OVER (PARTITION BY pId ORDER BY income) AS rn FROM orders", "window function"),
        (
            "SELECT pId FROM (SELECT pId, RANK() OVER (PARTITION BY pId ORDER BY income) AS r FROM orders) t",
            "window function",
        ),
        (
            "SELECT order_id, LEAD(income) OVER (PARTITION BY pId ORDER BY order_id) AS nx FROM orders",
            "Flink SQL refuses it in streaming mode too",
        ),
        ("SELECT order_id FROM orders ORDER BY income", "ORDER BY without LIMIT"),
        (
            "SELECT pId FROM (SELECT pId, income, ROW_NUMBER() OVER (PARTITION BY pId ORDER BY income) AS rn "
            "FROM orders) t",
            "filter the subquery with WHERE rn = 1",
        ),
        (
            "SELECT pId FROM (SELECT pId, ROW_NUMBER() OVER (PARTITION BY pId) AS rn FROM orders) t WHERE rn = 1",
            "needs ORDER BY one column",
        ),
        ("SELECT pId FROM orders INTERSECT ALL SELECT pId FROM orders", "INTERSECT ALL"),
        ("SELECT * FROM orders EXCEPT SELECT * FROM orders", "EXCEPT: name the first branch's columns"),
        ("SELECT pId FROM orders UNION ALL SELECT pId, income FROM orders", "UNION ALL branches have 1 and 2"),
        ("SELECT pId, STDDEV(income) AS s FROM orders GROUP BY pId", "unsupported aggregate function STDDEV"),
        ("SELECT pId, SUM(incme) AS s FROM orders GROUP BY pId", "unknown column 'incme'"),
        ("SELECT pId, SUM(income) AS s FROM order GROUP BY pId", "unknown table 'order'"),
        ("SELECT pId, SUM(income) FROM orders GROUP BY pId", "needs an alias"),
        ("SELECT pId, income, SUM(income) AS s FROM orders GROUP BY pId", "'income' is neither in GROUP BY"),
        ("SELECT pId FROM orders ORDER BY pId", "ORDER BY"),
        ("SELECT pId, SUM(SUM(income)) AS s FROM orders GROUP BY pId", "nested aggregate"),
        ("SELECT pId FROM orders WHERE SUM(income) > 1", "not allowed in WHERE"),
        ("SELECT pId, COUNT(DISTINCT order_id, income) AS c FROM orders GROUP BY pId", "several columns"),
        ("SELECT pId FROM orders; SELECT 1", "one SELECT statement"),
        ("SELECT pId FROM orders WHERE (", "does not parse"),
    ],
)
def test_unsupported_or_invalid_sql_names_the_construct_and_the_yaml_line(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message) as info:
        plan(tmp_path, sql)
    assert re.search(r"q\.yaml:2(:\d+)?$", info.value.where)  # the YAML line of the one-line SQL


@pytest.mark.parametrize(
    "sql, call",
    [
        ("SELECT order_id, rand() AS r FROM orders", "RAND()"),
        ("SELECT order_id, current_timestamp() AS t FROM orders", "CURRENT_TIMESTAMP()"),
        ("SELECT pId, SUM(income * rand()) AS s FROM orders GROUP BY pId", "RAND()"),
        ("SELECT order_id, uuid() AS u FROM orders", "UUID()"),
    ],
)
def test_a_non_deterministic_call_is_a_plan_warning_naming_it_and_its_line(tmp_path, sql, call):
    found = plan(tmp_path, sql)
    yaml_line = (tmp_path / "q.yaml").read_text().splitlines()[1]
    column = yaml_line.lower().index(call.lower()) + 1  # where the call is written in the file
    assert len(found.warnings) == 1
    assert found.warnings[0].endswith(
        f"q.yaml:2:{column}: non-deterministic function {call}: its "
        f"result differs between the stream and the batch run, so "
        f"unity cannot be checked"
    )
    assert f"WARNING {found.warnings[0]}" in explain(found)
    assert plan(tmp_path, "SELECT order_id, income FROM orders").warnings == ()


def test_errors_in_multi_line_sql_name_the_yaml_line_of_the_construct(tmp_path):
    path = orders_spec(tmp_path, "x")
    text = path.read_text().replace(
        "sql: x", "sql: |\n  SELECT pId,\n    SUM(income) AS s,\n    STDDEV(income) AS d\n  FROM orders GROUP BY pId"
    )
    path.write_text(text)
    with pytest.raises(SqlError) as info:
        plan_query(load_spec(path))
    assert info.value.where.endswith("q.yaml:5:5")
    assert "STDDEV" in info.value.message


def test_a_projection_without_the_source_key_has_no_upsert_key(tmp_path):
    p = plan(tmp_path, "SELECT pId, income FROM orders")
    assert p.notes.upsert_keys[p.root.input] is None and p.sink_mode == "retract"
    assert "the query's output has no unique key" in explain(p)
    with pytest.raises(SqlError, match="no unique key"):
        plan(tmp_path, "SELECT pId, income FROM orders", sink={"changelog_mode": "upsert"})


def test_a_sink_keyed_by_other_columns_gets_the_materializer_and_says_why(tmp_path):
    p = plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId", sink={"primary_key": ["s"]})
    assert p.sink_key == ("s",)
    assert list(p.notes.materialize) == ["the sink key [s] does not contain the upsert key [pId]"]
    assert "upsertMaterialize=[true]" in explain(p)


def test_materialize_none_and_force_override_auto(tmp_path):
    sql = "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId"
    assert not plan(tmp_path, sql, sink={"primary_key": ["s"], "upsert_materialize": "none"}).materialize
    assert list(plan(tmp_path, sql, sink={"upsert_materialize": "force"}).notes.materialize) == [
        "upsert_materialize: force"
    ]
    assert not plan(tmp_path, sql).materialize


def test_seed_003_join_on_a_non_key_column_into_a_sink_keyed_by_the_left_key_is_materialized(tmp_path):
    sql = "SELECT o.order_id, o.pId, p.income AS attr FROM orders o JOIN orders p ON o.pId = p.order_id"
    p = plan(tmp_path, sql, sink={"primary_key": ["order_id"]})
    assert p.notes.upsert_keys[p.root.input] is None
    assert p.materialize and "no upsert key" in p.notes.materialize[0]


@pytest.mark.parametrize(
    "sql, kinds, producer",
    [
        ("SELECT pId, SUM(income) AS s FROM orders GROUP BY pId", "update and delete", "ChangelogSource"),
        ("SELECT order_id, pId FROM orders", "update and delete", "ChangelogSource\\(table=\\[orders\\]"),
    ],
)
def test_an_append_sink_rejects_updates_naming_the_operator_that_produces_them(tmp_path, sql, kinds, producer):
    with pytest.raises(
        SqlError, match=f"doesn't support consuming {kinds} changes which is produced by node {producer}"
    ):
        plan(tmp_path, sql, sink={"changelog_mode": "append"})


def test_an_append_sink_names_the_group_aggregate_over_an_insert_only_source(tmp_path):
    with pytest.raises(SqlError, match="consuming update changes which is produced by node GroupAggregate"):
        plan(
            tmp_path,
            "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId",
            sink={"changelog_mode": "append"},
            source={"format": "json", "primary_key": []},
        )
    p = plan(
        tmp_path,
        "SELECT order_id, pId FROM orders",
        sink={"changelog_mode": "append"},
        source={"format": "json", "primary_key": []},
    )
    assert p.sink_mode == "append"


def test_an_upsert_sink_needs_a_key_and_a_retract_sink_does_not(tmp_path):
    sql = "SELECT pId FROM orders UNION ALL SELECT pId FROM orders"
    with pytest.raises(SqlError, match="an upsert sink needs a primary key"):
        plan(tmp_path, sql, sink={"changelog_mode": "upsert"})
    assert plan(tmp_path, sql).sink_mode == "retract"  # no key and no mode named: retract
    assert plan(tmp_path, sql, sink={"changelog_mode": "retract"}).sink_mode == "retract"


def test_an_unknown_sink_key_column_is_named(tmp_path):
    with pytest.raises(SqlError, match="sink.primary_key: pid2 not among"):
        plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId", sink={"primary_key": ["pid2"]})


def test_group_by_alias_and_position_resolve_to_the_select_expression(tmp_path):
    for group in ("bucket", "1"):
        p = plan(tmp_path, f"SELECT pId % 10 AS bucket, SUM(income) AS s FROM orders GROUP BY {group}")
        assert p.sink_key == ("bucket",)
        assert isinstance(p.root.input, Calc) and isinstance(p.root.input.input, GroupAggregate)


def test_repeated_aggregates_are_computed_once(tmp_path):
    p = plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId HAVING SUM(income) > 3")
    assert [a.sql() for a in p.aggregate.aggregates] == ["SUM(income)"]


def test_min_max_and_distinct_are_not_invertible(tmp_path):
    p = plan(
        tmp_path,
        "SELECT pId, MIN(income) AS a, MAX(income) AS b, COUNT(DISTINCT order_id) AS c, "
        "SUM(income) AS d, AVG(income) AS e, COUNT(income) AS f FROM orders GROUP BY pId",
    )
    assert [a.invertible for a in p.aggregate.aggregates] == [False, False, False, True, True, True]


def test_changelog_modes_follow_the_inference_rules(tmp_path):
    p = plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId")
    source = p.sources[0]
    assert str(p.changelog_mode(source)) == "[I,UB,UA,D]"
    assert str(p.changelog_mode(p.aggregate)) == "[I,UA,D]"
    insert_only = plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId", source={"format": "json"})
    assert str(insert_only.changelog_mode(insert_only.aggregate)) == "[I,UA]"


def timed(tmp_path, sql, sink=None, source=None):
    source = {
        "schema": "order_id BIGINT, pId BIGINT, income BIGINT, ts TIMESTAMP",
        "event_time": "ts",
        "watermark": "5 seconds",
        **(source or {}),
    }
    return plan(tmp_path, sql, sink=sink, source=source)


@pytest.mark.parametrize(
    "sql, source, message",
    [
        (
            "SELECT pId, window.start AS ws, SUM(income) AS s FROM orders GROUP BY pId, window(ts, '1 minute')",
            {"event_time": None, "watermark": None},
            "needs sources.orders.event_time: ts",
        ),
        (
            "SELECT pId, window.start AS ws, SUM(income) AS s FROM orders GROUP BY pId, window(order_id, '1 minute')",
            {"event_time": "order_id"},
            "not a TIMESTAMP",
        ),
        (
            "SELECT pId, window.start AS ws, COUNT(*) AS n FROM orders GROUP BY pId, window(ts, '1 parsec')",
            {},
            "not an interval",
        ),
        (
            "SELECT pId, window.start AS ws, COUNT(*) AS n FROM orders "
            "GROUP BY pId, window(ts, '1 minute', '7 seconds')",
            {},
            "the slide must divide the size",
        ),
        (
            "SELECT pId, window AS w, COUNT(*) AS n FROM orders GROUP BY pId, window(ts, '1 minute')",
            {},
            "not the window itself",
        ),
        (
            "SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId, session_window(ts, '5 minutes')",
            {},
            "no unique key",
        ),  # a session is supported, but this output has no column to tell sessions apart
        (
            "SELECT pId, session_window.start AS s, COUNT(*) AS n FROM orders GROUP BY pId, session_window(ts)",
            {},
            "session_window\\(\\) takes a time column and a gap",
        ),
        ("SELECT pId, window.start AS ws, COUNT(*) AS n FROM orders GROUP BY pId", {}, "needs GROUP BY window"),
    ],
)
def test_window_errors_name_the_problem(tmp_path, sql, source, message):
    with pytest.raises((SqlError, SpecError), match=message):
        timed(tmp_path, sql, source=source)


def test_a_window_query_without_the_window_in_the_select_has_no_key(tmp_path):
    with pytest.raises(SqlError, match="no unique key"):
        timed(tmp_path, "SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId, window(ts, '1 minute')")


def test_emit_final_is_append_only_and_early_is_an_update_stream(tmp_path):
    sql = "SELECT pId, window.start AS ws, SUM(income) AS s FROM orders GROUP BY pId, window(ts, '1 minute')"
    final = timed(tmp_path, sql)
    assert final.window.emit == "final" and str(final.changelog_mode(final.root)) == "[I]"
    early = timed(tmp_path, sql, sink={"emit": "early"})
    assert str(early.changelog_mode(early.root)) == "[I,UA,D]"
    assert early.sink_key == ("ws", "pId")


def test_emit_is_only_for_windowed_queries(tmp_path):
    with pytest.raises(SqlError, match="sink.emit applies to windowed queries"):
        plan(tmp_path, "SELECT pId, SUM(income) AS s FROM orders GROUP BY pId", sink={"emit": "final"})


LOOKUP = {
    "customers": {
        "kind": "http",
        "url": "http://127.0.0.1:1/customers/{pId}",
        "key": ["pId"],
        "output": "name STRING, tier STRING",
    }
}


@pytest.mark.parametrize(
    "sql, message",
    [
        ("SELECT o.order_id, c.name FROM orders o RIGHT JOIN customers c ON o.pId = c.pId", "a lookup join is"),
        (
            "SELECT o.order_id, c.name FROM orders o JOIN customers c ON o.pId = c.pId AND o.income > 1",
            "equates each key column of customers",
        ),
        (
            "SELECT o.order_id, c.name FROM orders o JOIN customers c ON o.income = c.name",
            "equates each key column of customers",
        ),
    ],
)
def test_a_lookup_join_is_an_equality_on_the_lookup_key_and_nothing_else(tmp_path, sql, message):
    path = orders_spec(tmp_path, sql)
    path.write_text(path.read_text() + yaml.safe_dump({"lookups": LOOKUP}))
    with pytest.raises(SqlError, match=message):
        plan_query(load_spec(path))


def test_a_lookup_join_keeps_the_input_key_and_types_the_lookup_key_like_its_input(tmp_path):
    path = orders_spec(
        tmp_path, "SELECT o.order_id, c.pId AS looked_up, c.tier FROM orders o LEFT JOIN customers c ON o.pId = c.pId"
    )
    path.write_text(path.read_text() + yaml.safe_dump({"lookups": LOOKUP}))
    found = plan_query(load_spec(path))
    assert found.sink_key == ("order_id",)
    assert "LookupJoin(table=[customers], joinType=[LeftJoin], on=[pId = customers.pId]" in explain(found)


def test_the_sink_key_traces_each_group_key_unless_it_is_computed(tmp_path):
    renamed = plan(tmp_path, "SELECT pId AS product, SUM(income) AS s FROM orders GROUP BY pId")
    assert renamed.group_key_columns() == (("pId", "product"),)
    computed = plan(
        tmp_path,
        "SELECT CONCAT(CAST(pId AS STRING), '#') AS k, SUM(income) AS s FROM orders GROUP BY pId",
        sink={"primary_key": ["k"]},
    )
    assert computed.group_key_columns() is None
    partial = plan(
        tmp_path,
        "SELECT pId, order_id, SUM(income) AS s FROM orders GROUP BY pId, order_id",
        sink={"primary_key": ["pId"]},
    )
    assert partial.group_key_columns() is None  # the sink key leaves order_id out


def test_a_ranking_subquery_may_order_and_partition_by_columns_it_does_not_select(tmp_path):
    p = plan(
        tmp_path,
        "SELECT order_id FROM (SELECT order_id, ROW_NUMBER() OVER (PARTITION BY pId "
        "ORDER BY income DESC) AS rn FROM orders) WHERE rn = 1",
    )
    dedup = p.final_stage.root.input.input
    assert (dedup.keys, dedup.order_col, dedup.selected) == (("pId",), "income", ("order_id",))
    assert dedup.output_names == ("order_id", "rn")
    assert p.notes.upsert_keys[dedup] is None  # rows of an unselected partition key have no key


@pytest.mark.parametrize("condition, limit", [("rn = 1", 1), ("rn <= 3", 3), ("rn < 3", 2), ("rn <= 1", 1)])
def test_the_row_number_filter_sets_how_many_rows_a_key_keeps(tmp_path, condition, limit):
    p = plan(
        tmp_path,
        f"SELECT order_id, pId, rn FROM (SELECT order_id, pId, income, ROW_NUMBER() OVER "
        f"(PARTITION BY pId ORDER BY income DESC) AS rn FROM orders) WHERE {condition}",
    )
    ranked = p.final_stage.root.input.input
    assert ranked.limit == limit
    assert p.notes.upsert_keys[ranked] == (("pId",) if limit == 1 else ("pId", "rn"))
    line = "Deduplicate(keep=[LastRow]" if limit == 1 else f"Rank(rankRange=[rankStart=1, rankEnd={limit}]"
    assert line in explain(p)


@pytest.mark.parametrize(
    "where, limit, kept",
    [
        ("rn <= 3", 3, None),
        ("rn <= 3 AND rn = 1", 1, None),
        ("income > 5 AND rn <= 3", 3, "income > 5"),
        ("(rn < 4 AND pId <> 2) AND income > 5", 3, "pId <> 2 AND income > 5"),
    ],
)
def test_the_row_number_filter_leaves_the_select_only_its_other_conditions(tmp_path, where, limit, kept):
    p = plan(
        tmp_path,
        f"SELECT order_id, pId FROM (SELECT order_id, pId, income, ROW_NUMBER() OVER "
        f"(PARTITION BY pId ORDER BY income DESC) AS rn FROM orders) WHERE {where}",
    )
    select = p.final_stage.root.input
    assert select.input.limit == limit
    assert (select.condition.sql("spark") if select.condition is not None else None) == kept


@pytest.mark.parametrize(
    "where, message",
    [
        ("pId NOT IN (SELECT pId FROM orders)", "NOT IN \\(SELECT ...\\) is not supported"),
        ("income > (SELECT MAX(income) FROM orders)", "unsupported subquery"),
        ("pId IN (SELECT pId FROM orders) OR income > 1", "unsupported subquery"),
        ("EXISTS (SELECT 1 FROM orders p WHERE p.income > o.income)", "by equalities only"),
        ("EXISTS (SELECT 1 FROM orders p WHERE p.income > 1)", "uncorrelated EXISTS is not supported"),
        ("pId IN (SELECT pId, income FROM orders)", "selects 2 columns, not one"),
    ],
)
def test_a_subquery_lockstep_cannot_run_is_named_in_one_line(tmp_path, where, message):
    with pytest.raises(SqlError, match=message):
        plan(tmp_path, f"SELECT order_id FROM orders o WHERE {where}")


def test_in_and_exists_plan_as_semi_and_anti_joins(tmp_path):
    semi = explain(
        plan(tmp_path, "SELECT order_id FROM orders o WHERE pId IN (SELECT pId FROM orders WHERE income > 1)")
    )
    assert "Join(joinType=[LeftSemiJoin], on=[pId = pId]" in semi
    anti = explain(
        plan(
            tmp_path,
            "SELECT order_id FROM orders o WHERE NOT EXISTS "
            "(SELECT 1 FROM orders p WHERE p.pId = o.pId AND p.income > 9)",
        )
    )
    assert "Join(joinType=[LeftAntiJoin], on=[pId = pId]" in anti and "where=[income > 9]" in anti
