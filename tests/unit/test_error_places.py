"""Errors in a spec name the file, the line and, inside the SQL, the column, with the line itself
and a caret under the spot printed under the message."""

import pickle
import re

import pytest

from jobs.cli.main import main
from jobs.errors import InputError, RunLocked, SqlError
from jobs.plan import plan_query
from jobs.spec import load_spec
from tests.conftest import write_spec

SPEC = """
name: q
sql: |
  SELECT pId, SUM(income) AS total
  FROM orders GROUP BY pId
sources:
  orders:
    path: data/orders
    format: changelog-json
    schema: "order_id BIGINT, pId BIGINT, income BIGINT, ts TIMESTAMP"
    primary_key: [order_id]
"""


def failure(tmp_path, old: str, new: str) -> SqlError:
    assert old in SPEC
    with pytest.raises(SqlError) as info:
        plan_query(load_spec(write_spec(tmp_path, SPEC.replace(old, new), name="q.yaml")))
    return info.value


def caret_under(error: SqlError) -> str:
    """The text the excerpt's carets point at."""
    line, carets = error.excerpt.splitlines()
    start = carets.index("^")
    return line[start : len(carets)]


@pytest.mark.parametrize(
    "old, new, where, message, marked",
    [
        (
            "FROM orders GROUP",
            "FROM orders WHERE GROUP",
            "q.yaml:4:21",
            "SQL does not parse: incomplete WHERE",
            "GROUP BY",
        ),
        ("SUM(income)", "SUM(incme)", "q.yaml:3:19", "unknown column 'incme'", "incme"),
        (
            "FROM orders GROUP",
            "FROM orders WHERE income = = 3 GROUP",
            "q.yaml:4:30",
            "SQL does not parse: an expression is incomplete",
            "=",
        ),
        ("FROM orders GROUP", "FROM ordrs GROUP", "q.yaml:4:8", "unknown table 'ordrs'", "ordrs"),
        # window(...) is renamed before sqlglot parses: the column is still the one written
        ("SELECT pId,", "SELECT pId, window(tss, '1 minute') AS w,", "q.yaml:3:22", "unknown column 'tss'", "tss"),
        ("GROUP BY pId", "GROUP BY pId LIMIT 5", "q.yaml:4:34", "LIMIT is accepted as ORDER BY", "5"),
    ],
)
def test_a_sql_error_names_file_line_and_column_and_marks_the_spot(tmp_path, old, new, where, message, marked):
    error = failure(tmp_path, old, new)
    assert error.where.endswith(where) and error.message.startswith(message)
    assert caret_under(error) == marked


def test_an_unclosed_quote_is_a_located_parse_error_not_a_crash(tmp_path):
    error = failure(tmp_path, "FROM orders GROUP", "FROM orders WHERE pId = 'x GROUP")
    assert re.search(r"q\.yaml:4:\d+$", error.where)
    assert "unclosed quote" in error.message and error.excerpt


@pytest.mark.parametrize(
    "old, new, where, message",
    [
        (
            "primary_key: [order_id]",
            "primary_key: [ordr]",
            "q.yaml:10: sources.orders.primary_key",
            "primary key column 'ordr' is not in the schema",
        ),
        ("income BIGINT, ts", "income BIGNT(, ts", "q.yaml:9: sources.orders.schema", "schema does not parse"),
        (
            "primary_key: [order_id]",
            "primary_key: [order_id]\n    event_time: tss\n    watermark: 5 seconds",
            "q.yaml:11: sources.orders.event_time",
            "event_time column 'tss' is not in the schema",
        ),
    ],
)
def test_a_source_error_names_the_line_of_its_key(tmp_path, old, new, where, message):
    assert old in SPEC
    with pytest.raises(Exception) as info:
        plan_query(load_spec(write_spec(tmp_path, SPEC.replace(old, new), name="q.yaml")))
    assert info.value.where.endswith(where) and message in info.value.message


def test_the_cli_prints_the_excerpt_under_the_one_line_message(tmp_path, capsys):
    path = write_spec(tmp_path, SPEC.replace("SUM(income)", "SUM(incme)"), name="q.yaml")
    assert main(["explain", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("lockstep: error: ") and lines[0].endswith(
        "q.yaml:3:19: unknown column 'incme' (columns in scope: order_id, pId, income, ts)"
    )
    assert lines[1:] == ["    SELECT pId, SUM(incme) AS total", "                    ^^^^^"]


@pytest.mark.parametrize("kind", [InputError, RunLocked])
def test_an_error_a_spark_task_returns_arrives_with_its_kind_message_and_place(kind):
    """Staging tasks return their LockstepError as a value (jobs/stream/staging_tasks.py)."""
    sent = kind("-D for a key never inserted", where="orders/001.json:4")
    arrived = pickle.loads(pickle.dumps(sent))
    assert type(arrived) is kind and arrived.where == sent.where and arrived.message == sent.message
    assert str(arrived) == str(sent) and arrived.exit_code == 2
