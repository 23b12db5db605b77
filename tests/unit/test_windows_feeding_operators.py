"""A tumbling or hopping window's final rows may go on to another operator (a Top-N per window,
an aggregate over windows): the window runs as a first stage, its bounds under names a stage
table may hold. What cannot be checked that way is refused in one line."""

from __future__ import annotations

import pytest

from jobs.errors import SqlError
from jobs.plan import plan_query
from jobs.plan.nodes import Deduplicate, StageInput, WindowAggregate
from jobs.plan.stages import STAGE_COLUMNS
from jobs.spec import load_spec
from tests.conftest import write_spec

SPEC = """
name: busiest
sql: {sql}
sources:
  t:
    path: t
    format: json
    schema: "id BIGINT, g STRING, ts TIMESTAMP"
    event_time: ts
    watermark: "5 seconds"
    bounded: {bounded}
  u:
    path: u
    format: json
    schema: "id BIGINT, g STRING, ts TIMESTAMP"
{sink}
"""
WINDOWS = "SELECT window.start AS ws, window.end AS we, g, COUNT(*) AS n, MAX(id) AS last_id FROM t GROUP BY {w}, g"
TOP = (
    "SELECT ws, g, n FROM (SELECT ws, g, n, ROW_NUMBER() OVER (PARTITION BY ws, we ORDER BY last_id DESC) AS rn "
    "FROM ({windows}) w) r WHERE rn <= 1"
)


def plan(tmp_path, sql, bounded="true", sink=""):
    return plan_query(load_spec(write_spec(tmp_path, SPEC.format(sql=sql, bounded=bounded, sink=sink))))


def test_a_top_n_per_window_runs_as_a_stage_after_the_window(tmp_path):
    planned = plan(tmp_path, TOP.format(windows=WINDOWS.format(w="window(ts, '1 minute')")))
    first, last = planned.stages
    assert isinstance(first.root.input.input, WindowAggregate)
    assert first.root.output_names[:2] == (STAGE_COLUMNS["__wstart"], STAGE_COLUMNS["__wend"])
    staged = next(n for n in last.root.walk() if isinstance(n, StageInput))
    assert not any(name.startswith("__") for name in staged.output_names)
    assert any(isinstance(n, Deduplicate) for n in last.root.walk())
    assert "window(ts, '1 minute')" in first.sql and "lockstep_window_start" in first.sql


@pytest.mark.parametrize(
    "sql, bounded, sink, message",
    [
        (TOP, "false", "", "needs a bounded source"),
        (TOP, "true", "sink:\n  emit: early", "sink.emit applies to windowed queries"),
        (
            "SELECT g, COUNT(*) AS n FROM (SELECT t.g, t.ts FROM t JOIN u ON t.g = u.g) j "
            "GROUP BY window(j.ts, '1 minute'), g",
            "true",
            "",
            "a regular join or an aggregate makes it a plain timestamp",
        ),
        (
            "SELECT g, MAX(n) AS m FROM (SELECT g, COUNT(*) AS n FROM t "
            "GROUP BY session_window(ts, '1 minute'), g) s GROUP BY g",
            "true",
            "",
            "a session window must read a source directly",
        ),
    ],
)
def test_what_cannot_be_checked_is_refused_in_one_line(tmp_path, sql, bounded, sink, message):
    text = sql.format(windows=WINDOWS.format(w="window(ts, '1 minute')"))
    with pytest.raises(SqlError, match=message) as refused:
        plan(tmp_path, text, bounded, sink)
    assert "\n" not in refused.value.message
