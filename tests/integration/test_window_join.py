"""A window join (Flink's): two windows' rows joined on both windows' start and end and a key,
the same in stream and batch, with a state that ends: a row goes once the other side's
watermark passes its window's end (plan/window_rows.py, operators/join/expiry.py; on the spark
engine, LiveRows' timers)."""

from __future__ import annotations

import pytest

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.state.live_state import COMPACT_EVERY
from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both, state_rows

SIDE = """
  {name}:
    path: {name}
    format: json
    schema: "id BIGINT, k BIGINT, v BIGINT, ts TIMESTAMP"
    event_time: ts
    watermark: "2 seconds"
"""
SPEC = (
    """
name: clicks_beside_views
sql: |
  SELECT c.minute, c.k, c.v AS click, w.v AS view
  FROM (SELECT window(ts, '1 minute').start AS minute, window(ts, '1 minute').end AS minute_end, k, v FROM clicks) c
  {kind} JOIN (SELECT window(ts, '1 minute').start AS minute, window(ts, '1 minute').end AS minute_end, k, v
               FROM views) w
  ON c.minute = w.minute AND c.minute_end = w.minute_end AND c.k = w.k
sources:"""
    + SIDE.format(name="clicks")
    + SIDE.format(name="views")
    + """stream:
  rows_per_batch: 4
  engine: {engine}
"""
)
MINUTES = 40


def at(second: int) -> str:
    return f"2026-11-21 09:{second // 60:02d}:{second % 60:02d}"


def _events(tmp_path, minutes: int = MINUTES) -> tuple[list[dict], list[dict]]:
    """Each minute two clicks (keys 1 and 2) and two views (keys 1 and 2, or 3 and 2 every fifth
    minute): the two sources' micro-batches keep in step."""
    clicks = [
        {"id": 2 * m + i, "k": i + 1, "v": 10 * m + i, "ts": at(60 * m + 20 * i + 5)}
        for m in range(minutes)
        for i in range(2)
    ]
    views = [
        {
            "id": 2 * m + i,
            "k": 3 if m % 5 == 0 and i == 0 else i + 1,
            "v": 1000 + 2 * m + i,
            "ts": at(60 * m + 20 * i + 15),
        }
        for m in range(minutes)
        for i in range(2)
    ]
    write_changelog(tmp_path / "clicks", "001.json", clicks)
    write_changelog(tmp_path / "views", "001.json", views)
    return clicks, views


@pytest.mark.parametrize("kind", ["INNER", "FULL"])
def test_a_window_join_matches_rows_of_one_window_and_lets_go_of_closed_windows(spark, tmp_path, kind):
    clicks, views = _events(tmp_path)
    spec = write_spec(tmp_path, SPEC.format(kind=kind, engine="local"))
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    _assert_joined(result.stream, clicks, views, kind)
    state = result.layout.operator_state
    kept = state_rows(state / "left") + state_rows(state / "right")
    # Of 160 rows: what the micro-batches since the last fold brought (a closed window's rows go
    # when the state is folded, or at once when a change touches their key), 8 rows a batch.
    assert kept <= 8 * (COMPACT_EVERY + 1) < (len(clicks) + len(views)) / 2, kept
    held = [batch["state_rows"] for batch in report["micro_batches"]]  # the report's figure
    assert held[-1] == kept < max(held), held


def test_on_the_spark_engine_closed_windows_rows_leave_its_keyed_state(spark, tmp_path):
    clicks, views = _events(tmp_path, minutes=15)
    spec = write_spec(tmp_path, SPEC.format(kind="FULL", engine="spark"))
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    _assert_joined(result.stream, clicks, views, "FULL")
    # 8 rows a micro-batch, a minute's; Spark's watermark trails lockstep's by up to two
    # micro-batches: a few minutes' rows are held, never the 60.
    held = [batch["state_rows"] for batch in report["micro_batches"]]
    assert max(held) <= 4 * 8 and held[-1] < max(held), held


def _assert_joined(stream: list[dict], clicks: list[dict], views: list[dict], kind: str) -> None:
    matched = sorted((r["click"], r["view"]) for r in stream if r["click"] is not None and r["view"] is not None)
    expected = sorted(
        (c["v"], w["v"]) for c in clicks for w in views if c["ts"][:16] == w["ts"][:16] and c["k"] == w["k"]
    )
    minutes = len(clicks) // 2
    assert matched == expected and len(expected) == 2 * minutes - (minutes + 4) // 5
    unmatched = [r for r in stream if r["click"] is None or r["view"] is None]
    assert len(unmatched) == (0 if kind == "INNER" else len(clicks) + len(views) - 2 * len(expected))
