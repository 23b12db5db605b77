"""A window over an earlier operator's rows, by an event time those rows keep: a deduplication's
or a Top-N's rows keep their source's event time, and a window's rows have window_time(window).
The window runs in a later stage, closed by the watermark the earlier stage's rows carry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.event_time import join_delay, window_times_written_out
from jobs.plan.nodes import Join, StageInput, WindowAssign
from jobs.plan.window_rows import window_join_bounds
from jobs.spec import load_spec
from tests.conftest import write_spec

SPEC = """
name: windows_over_stages
sql: {sql}
sources:
  t:
    path: t
    format: changelog-json
    schema: "id BIGINT, g STRING, x BIGINT, ts TIMESTAMP"
    primary_key: [id]
    event_time: ts
    watermark: "5 seconds"
"""
MINUTES = "SELECT window_time(window) AS wt, g, COUNT(*) AS n FROM t GROUP BY window(ts, '1 minute'), g"
CASCADE = f"SELECT window.start AS ws, g, SUM(n) AS n FROM ({MINUTES}) m GROUP BY window(wt, '5 minutes'), g"
FIRST = (
    "SELECT id, g, x, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY g ORDER BY ts {d}) AS rn FROM t) r "
    "WHERE rn = 1"
)
OVER_DEDUP = "SELECT window.start AS ws, COUNT(*) AS n FROM ({first}) d GROUP BY window(ts, '1 minute')"


def plan(tmp_path, sql):
    return plan_query(load_spec(write_spec(tmp_path, SPEC.format(sql=sql))))


def test_cascading_windows_read_the_first_windows_rows_by_their_window_time(tmp_path):
    planned = plan(tmp_path, CASCADE)
    first, last = planned.stages
    staged = next(n for n in last.root.walk() if isinstance(n, StageInput))
    assert staged.event_time == "lockstep_window_end"  # its watermark is typed as the window's end
    outer = next(n for n in last.root.walk() if isinstance(n, WindowAssign))
    assert outer.window.time_col == "wt" and outer.window.size.total_seconds() == 300
    assert first.window_assign is not None and first.window_assign.window.time_col == "ts"
    # Late changes are the first window's, judged in the source: the second finds none late.
    assert [late.stage for late in planned.late_windows] == [first]


@pytest.mark.parametrize("direction", ["ASC", "DESC"])
def test_a_window_over_a_deduplication_judges_lateness_in_the_deduplications_rows(tmp_path, direction):
    planned = plan(tmp_path, OVER_DEDUP.format(first=FIRST.format(d=direction)))
    first, last = planned.stages
    staged = next(n for n in last.root.walk() if isinstance(n, StageInput))
    assert staged.event_time == "ts"
    assert [late.read for late in planned.late_windows] == [staged]
    assert planned.sink_window_input is staged


def test_the_batch_job_writes_window_time_as_spark_runs_it():
    written = window_times_written_out(MINUTES)
    assert "window_time" not in written
    assert "(window.end - INTERVAL '1' MICROSECOND) AS wt" in written


@pytest.mark.parametrize(
    "sql, message",
    [
        (
            "SELECT window.start AS ws, COUNT(*) AS n FROM (SELECT g, MAX(ts) AS ts FROM t GROUP BY g) a "
            "GROUP BY window(ts, '1 minute')",
            "not an event time here",
        ),
        (
            "SELECT window.start AS ws, COUNT(*) AS n FROM (SELECT id, ts AS t2 FROM t) a "
            "GROUP BY window(t2, '1 minute')",
            "use the event time under its own name, ts",
        ),
        (
            f"SELECT g, MAX(n) AS m FROM ({CASCADE}) c GROUP BY g",
            "must write the sink",
        ),
        (
            "SELECT session_window.start AS s, COUNT(*) AS n FROM (" + FIRST.format(d="ASC") + ") d "
            "GROUP BY session_window(ts, '1 minute')",
            "session_window() applies to a source's event time",
        ),
        ("SELECT window_time(window) AS wt FROM t", "needs GROUP BY window"),
    ],
)
def test_what_is_not_an_event_time_is_refused_in_one_line(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        plan(tmp_path, sql)
    assert "\n" not in refused.value.message


INSERTS = SPEC.replace("format: changelog-json", "format: json").replace("    primary_key: [id]\n", "")
ROWS = "SELECT window(ts, '1 minute').start AS ws, window(ts, '1 minute').end AS we, id, g, x FROM t"
RANKED = (
    "SELECT ws, id, x FROM (SELECT ws, id, x, ROW_NUMBER() OVER (PARTITION BY {p} ORDER BY x DESC) AS rn "
    "FROM ({rows}) w) r WHERE rn <= 2"
)


def plan_inserts(tmp_path, sql):
    return plan_query(load_spec(write_spec(tmp_path, INSERTS.format(sql=sql))))


def test_a_top_n_per_window_ranks_a_windows_rows_without_an_aggregate(tmp_path):
    planned = plan_inserts(tmp_path, RANKED.format(p="ws, we", rows=ROWS))
    (stage,) = planned.stages
    assign = stage.window_assign
    assert assign is not None and stage.window is None  # no aggregate: the Top-N takes the rows
    assert [late.window for late in planned.late_windows] == [assign]


@pytest.mark.parametrize(
    "sql, message",
    [
        (RANKED.format(p="ws", rows=ROWS), "partitioned by the window's start and end"),
        (f"SELECT ws, COUNT(*) AS n FROM ({ROWS}) w GROUP BY ws", "GROUP BY window(...) aggregates them"),
        (
            "SELECT window(ts, '1 minute').start AS ws, window(ts, '2 minutes').end AS we FROM t",
            "one window(...) per SELECT",
        ),
        ("SELECT session_window(ts, '1 minute').start AS s FROM t", "session_window(...) needs GROUP BY"),
    ],
)
def test_what_a_windows_rows_cannot_feed_is_refused_in_one_line(tmp_path, sql, message):
    with pytest.raises(SqlError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")) as refused:
        plan_inserts(tmp_path, sql)
    assert "\n" not in refused.value.message


def test_a_windows_rows_without_an_aggregate_need_an_insert_only_source(tmp_path):
    with pytest.raises(SqlError, match="need an insert-only source"):
        plan(tmp_path, RANKED.format(p="ws, we", rows=ROWS))


TWO = INSERTS.replace(
    "sources:\n",
    'sources:\n  u:\n    path: u\n    format: json\n    schema: "id BIGINT, g STRING, x BIGINT, ts TIMESTAMP"\n'
    '    event_time: ts\n    watermark: "5 seconds"\n',
)
U_ROWS = ROWS.replace("FROM t", "FROM u")
JOINED = "SELECT l.ws, l.x AS lx, r.x AS rx FROM ({left}) l {kind} JOIN ({right}) r ON {on}"
BOTH_BOUNDS = "l.ws = r.ws AND l.we = r.we AND l.g = r.g"


def plan_two(tmp_path, sql):
    return plan_query(load_spec(write_spec(tmp_path, TWO.format(sql=sql))))


@pytest.mark.parametrize("kind", ["", "LEFT", "RIGHT", "FULL"])
def test_a_window_join_joins_two_windows_rows_and_lets_go_of_closed_windows(tmp_path, kind):
    planned = plan_two(tmp_path, JOINED.format(left=ROWS, right=U_ROWS, kind=kind, on=BOTH_BOUNDS))
    join = next(n for n in planned.root.walk() if isinstance(n, Join))
    bounds = window_join_bounds(join)
    assert bounds is not None and bounds.lower == bounds.upper == timedelta(0)
    assert {late.read.table for late in planned.late_windows} == {"t", "u"}  # each side's late rows


def test_a_window_over_an_interval_joins_rows_closes_by_the_joins_held_back_watermark(tmp_path):
    joined = (
        "SELECT t.id, t.ts, u.x FROM t JOIN u ON t.g = u.g AND t.ts BETWEEN u.ts - INTERVAL 10 SECONDS "
        "AND u.ts + INTERVAL 30 SECONDS"
    )
    planned = plan_two(
        tmp_path, f"SELECT window.start AS ws, COUNT(*) AS n FROM ({joined}) j GROUP BY window(ts, '1 minute')"
    )
    first, last = planned.stages
    join = next(n for n in first.root.walk() if isinstance(n, Join))
    assert join_delay(join) == timedelta(seconds=30)  # a row of u can still join a row of t 30 s behind it
    staged = next(n for n in last.root.walk() if isinstance(n, StageInput))
    assert staged.event_time is not None and planned.sink_window_input is staged


@pytest.mark.parametrize(
    "left, right, on",
    [
        (ROWS, U_ROWS, "l.ws = r.ws AND l.g = r.g"),  # the window's end is not joined
        (ROWS, U_ROWS.replace("'1 minute'", "'2 minutes'"), BOTH_BOUNDS),  # not the same window
        (ROWS, "SELECT ts AS ws, ts AS we, g, x FROM u", BOTH_BOUNDS),  # one side is not a window's rows
    ],
)
def test_what_is_not_a_window_join_is_refused_in_one_line(tmp_path, left, right, on):
    with pytest.raises(SqlError, match="a window join") as refused:
        plan_two(tmp_path, JOINED.format(left=left, right=right, kind="", on=on))
    assert "\n" not in refused.value.message
