"""Hostile specs: every one is exit 2 with one line naming the file (and line); none is a
traceback, and none is exit 1 ("stream and batch disagree"). How long each takes is measured by
tests/benchmarks/bench_hostile_specs.py."""

from __future__ import annotations

import re

import pytest

from jobs.cli.main import main

GOOD = """name: q
sql: SELECT pId, SUM(income) AS total FROM orders GROUP BY pId
sources:
  orders:
    path: orders
    format: changelog-json
    schema: "order_id BIGINT, pId BIGINT, income BIGINT"
    primary_key: [order_id]
"""


def _spec(tmp_path, text: str | bytes):
    path = tmp_path / "q.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    (tmp_path / "orders").mkdir(exist_ok=True)
    return path


HOSTILE = [
    (
        GOOD.replace("description", "x").encode().replace(b"SELECT pId", b"SELECT \xff pId"),
        re.escape("q.yaml:2: not UTF-8 text (byte 0xff)"),
    ),
    ("name: q\nsql: " + "[" * 5000 + "]" * 5000 + "\n", "q.yaml: the YAML is nested too deep"),
    (
        GOOD.replace("SUM(income)", "SUM(" + "(" * 3000 + "income" + ")" * 3000 + ")"),
        "nested too deep|expression nodes",
    ),
    (
        GOOD.replace("SUM(income)", "SUM(" + " + ".join(["income"] * 20000) + ")"),
        "the query has 60,0\\d\\d expression nodes",
    ),
    (GOOD.replace("income BIGINT", "income DECIMAL(x,2)"), "DECIMAL takes whole numbers"),
    (
        GOOD.replace("primary_key: [order_id]", "primary_key: [order_id]\n    on_bad_rows: sometimes"),
        "q.yaml:9: sources.orders.on_bad_rows",
    ),
]


@pytest.mark.parametrize("text, message", HOSTILE)
def test_a_hostile_spec_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    code = main(["explain", str(_spec(tmp_path, text))])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert re.search(message, err), err


@pytest.mark.parametrize(
    "text, message",
    [
        (
            GOOD.replace("income BIGINT", "`<img src=x onerror=alert(1)>` BIGINT").replace("SUM(income)", "COUNT(*)"),
            "column name '<img src=x onerror=alert\\(1\\)>' contains '<', '>': names may not hold markup",
        ),
        (GOOD.replace("AS total", "AS `<b>total</b>`"), "column name '<b>total</b>' contains"),
    ],
)
def test_a_column_name_with_markup_never_reaches_a_page(tmp_path, capsys, text, message):
    assert main(["explain", str(_spec(tmp_path, text))]) == 2
    assert re.search(message, capsys.readouterr().err)
