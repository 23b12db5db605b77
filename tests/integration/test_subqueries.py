"""IN (SELECT ...), EXISTS and NOT EXISTS as semi and anti joins over changelogs: a row appears
when its first match arrives and is retracted when its last match goes (the reverse for NOT
EXISTS), step by step."""

from __future__ import annotations

import pytest

from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import feed_steps, run_both

SPEC = """
name: q
sql: |
  {sql}
sources:
  orders:
    path: orders
    format: changelog-json
    schema: "order_id BIGINT, customer BIGINT, amount BIGINT"
    primary_key: [order_id]
  vips:
    path: vips
    format: changelog-json
    schema: "customer BIGINT, since BIGINT"
    primary_key: [customer]
stream:
  rows_per_batch: 1
"""


def _changelogs(tmp_path):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            {"order_id": 1, "customer": 7, "amount": 10, "op": "+I"},
            {"order_id": 2, "customer": 8, "amount": 20, "op": "+I"},
            {"order_id": 3, "customer": None, "amount": 30, "op": "+I"},
        ],
    )
    write_changelog(
        tmp_path / "vips",
        "001.json",
        [
            {"customer": 7, "since": 2020, "op": "+I"},  # order 1 gains its match
            {"customer": 8, "since": 2019, "op": "+I"},  # order 2 too
            {"customer": 7, "since": 2020, "op": "-D"},  # order 1 loses it again
        ],
    )


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("SELECT order_id, amount FROM orders WHERE customer IN (SELECT customer FROM vips)", [2]),
        (
            "SELECT order_id, amount FROM orders o WHERE EXISTS (SELECT 1 FROM vips v WHERE v.customer = o.customer)",
            [2],
        ),
        (
            "SELECT order_id, amount FROM orders o WHERE EXISTS (SELECT 1 FROM vips v WHERE v.customer = o.customer "
            "AND v.since < 2020) AND amount > 5",
            [2],
        ),
        (
            "SELECT order_id, amount FROM orders o "
            "WHERE NOT EXISTS (SELECT 1 FROM vips v WHERE v.customer = o.customer)",
            [1, 3],
        ),  # a NULL customer matches nothing, so NOT EXISTS keeps order 3
    ],
)
def test_semi_and_anti_joins_follow_their_matches(spark, tmp_path, sql, expected):
    _changelogs(tmp_path)
    outcome = run_both(write_spec(tmp_path, SPEC.format(sql=sql)), tmp_path / "runs")
    assert [r["order_id"] for r in outcome.stream] == [r["order_id"] for r in outcome.batch] == expected


def test_a_semi_join_retracts_a_row_when_its_last_match_goes(spark, tmp_path):
    _changelogs(tmp_path)
    sql = "SELECT order_id, amount FROM orders WHERE customer IN (SELECT customer FROM vips)"
    outcome = run_both(write_spec(tmp_path, SPEC.format(sql=sql)), tmp_path / "runs")
    kinds = [(kind, order) for _, kind, order in feed_steps(outcome.feed, ["order_id"])]
    assert kinds == [("+I", 1), ("+I", 2), ("-D", 1)]
