"""Event-time windows: seed 004 in both emission modes, retractions inside open windows, late
events accounted for and explained, and a property test against the batch result."""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expectations.check import run_check
from jobs.batch.without_late import batch_without_late
from jobs.changelog.staging import StagedChangelog
from jobs.plan import plan_query
from jobs.point import LateRead
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import ROOT, write_changelog, write_spec
from tests.integration.conftest import feed_steps, run_both, same_rows, table_rows
from tests.strategies import TIMED_SCHEMA, examples, timed_changelogs, window_queries


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, 9, minute, second, tzinfo=UTC)


SEED_004 = [  # (pId, total, window start minute): the seed's final window results
    (1, 5, 1),
    (2, 13, 2),
    (3, 8, 6),
    (1, 18, 6),
    (2, 9, 9),
]


def seed_spec(tmp_path: Path, emit: str, bounded: bool = True) -> Path:
    shutil.copytree(ROOT / "conf" / "queries" / "data" / "timed_orders", tmp_path / "data" / "timed_orders")
    spec = yaml.safe_load((ROOT / "conf" / "queries" / "seed_004_windows.yaml").read_text())
    spec["sink"]["emit"] = emit
    spec["sources"]["orders"]["bounded"] = bounded
    path = tmp_path / "seed_004_windows.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def windows(rows):
    return sorted((r["pId"], r["total"], r["window_start"].minute) for r in rows)


def test_seed_004_final_emits_each_closed_window_once_as_an_insert(spark, tmp_path):
    # A bounded source (the default): the end of the input closes the last window too,
    # [09:12, 09:13) for product 5, as Flink's largest watermark at the end of a bounded source does.
    spec = seed_spec(tmp_path, "final")
    result = run_both(spec, tmp_path / "runs")
    assert windows(result.stream) == windows(result.batch) == sorted(SEED_004 + [(5, 1, 12)])
    assert {step[1] for step in feed_steps(result.feed, ["pId"])} == {"+I"}
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    assert report["open_windows"] == 0 and report["late_events"] == 0
    assert report["final_watermark"].startswith("2026-11-21 09:13:00")
    assert report["end_of_input"].startswith("bounded source")


def test_an_unbounded_source_keeps_the_last_window_open_and_the_check_compares_it_there(spark, tmp_path):
    spec = seed_spec(tmp_path, "final", bounded=False)
    result = run_both(spec, tmp_path / "runs")
    assert windows(result.stream) == sorted(SEED_004)
    # The batch has the window the watermark has not closed yet: [09:12, 09:13) for product 5.
    assert windows(result.batch) == sorted(SEED_004 + [(5, 1, 12)])
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass"
    assert report["open_windows"] == 1 and report["stream_rows"] == report["batch_rows"] == 6
    assert report["final_watermark"].startswith("2026-11-21 09:11:55")


def test_a_difference_in_an_open_window_fails_the_check(spark, tmp_path):
    # The check judges open windows too: a window the stream holds with a wrong value is a FAIL,
    # never "not compared".
    spec = seed_spec(tmp_path, "final", bounded=False)
    result = run_both(spec, tmp_path / "runs")
    from deltalake import DeltaTable

    pending = DeltaTable(str(result.layout.pending))
    pending.update(updates={"total": "total + 100"})
    point = json.loads(result.layout.consistency.read_text())
    point["open_windows_version"] = pending.version()
    result.layout.consistency.write_text(json.dumps(point))
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "fail" and report["mismatched_rows"] == 1


def test_seed_004_early_updates_windows_as_changes_arrive_and_drops_emptied_ones(spark, tmp_path):
    spec = seed_spec(tmp_path, "early")
    result = run_both(spec, tmp_path / "runs")
    assert windows(result.stream) == windows(result.batch) == sorted(SEED_004 + [(5, 1, 12)])
    steps = feed_steps(result.feed, ["pId", "total", "window_start"])
    # [09:06, 09:07) for product 1: order 5 (12) arrives, is corrected to 10, order 6 (8) follows.
    assert [(s[1], s[3]) for s in steps if s[2] == 1 and s[4].minute == 6] == [
        ("+I", 12),
        ("-U", 12),
        ("+U", 10),
        ("-U", 10),
        ("+U", 18),
    ]
    # Product 4's only order was inserted and cancelled within one micro-batch: never shown.
    assert [s for s in steps if s[2] == 4] == []
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass" and report["open_windows"] == 0


def late_case(tmp_path: Path) -> Path:
    events = [
        {"order_id": 1, "pId": 1, "income": 5, "row_time": "2026-11-21 09:01:10", "op": "+I"},
        {"order_id": 2, "pId": 1, "income": 7, "row_time": "2026-11-21 09:01:20", "op": "+I"},
        {"order_id": 3, "pId": 2, "income": 4, "row_time": "2026-11-21 09:03:00", "op": "+I"},
        {"order_id": 4, "pId": 2, "income": 1, "row_time": "2026-11-21 09:03:30", "op": "+I"},
        # The watermark is now past 09:02: these two land in the closed window [09:01, 09:02).
        {"order_id": 2, "pId": 1, "income": 7, "row_time": "2026-11-21 09:01:20", "op": "-D"},
        {"order_id": 5, "pId": 1, "income": 100, "row_time": "2026-11-21 09:01:50", "op": "+I"},
        {"order_id": 6, "pId": 3, "income": 2, "row_time": "2026-11-21 09:05:00", "op": "+I"},
    ]
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "001.json").write_text("".join(json.dumps(e) + "\n" for e in events))
    spec = {
        "name": "late",
        "sql": "SELECT pId, SUM(income) AS total, window.start AS window_start "
        "FROM orders GROUP BY pId, window(row_time, '1 minute')",
        "sources": {
            "orders": {
                "path": "data",
                "format": "changelog-json",
                "primary_key": ["order_id"],
                "schema": "order_id BIGINT, pId BIGINT, income BIGINT, row_time TIMESTAMP",
                "event_time": "row_time",
                "watermark": "5 seconds",
            }
        },
        "sink": {"emit": "final"},
        "stream": {"rows_per_batch": 2},
    }
    path = tmp_path / "late.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_late_events_are_left_out_counted_by_window_and_explain_the_whole_difference(spark, tmp_path):
    spec = late_case(tmp_path)
    result = run_both(spec, tmp_path / "runs")
    assert (1, 12, 1) in {(r["pId"], r["total"], r["window_start"].minute) for r in result.stream}
    assert (1, 105, 1) in {(r["pId"], r["total"], r["window_start"].minute) for r in result.batch}
    late = table_rows(result.layout.late_events)
    assert sorted((r["op"], r["order_id"]) for r in late) == [("+I", 5), ("-D", 2)]
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "fail"  # the results do differ
    assert report["late_events"] == 2
    assert report["late_events_by_window"] == [
        {"window_start": "2026-11-21 09:01:00", "window_end": "2026-11-21 09:02:00", "kind": "+I", "events": 1},
        {"window_start": "2026-11-21 09:01:00", "window_end": "2026-11-21 09:02:00", "kind": "-D", "events": 1},
    ]
    assert report["late_explanation"]["explains"] == "all"
    assert report["late_explanation"]["differing_rows"] == 1
    listed = report["listed_rows"]["late_events"]  # the rows themselves, times as text
    assert listed["table"] == "late_events" and listed["total"] == 2
    assert [(r["op"], r["order_id"], r["window_start"]) for r in listed["rows"]] == [
        ("+I", 5, "2026-11-21 09:01:00 UTC"),
        ("-D", 2, "2026-11-21 09:01:00 UTC"),
    ]
    failed = {e["name"] for e in report["expectations"] if not e["success"]}
    assert "expect_windows_without_late_events_agree" not in failed
    assert "expect_no_mismatched_values" in failed


def test_a_wide_watermark_admits_every_event_and_stream_equals_batch(spark, tmp_path):
    spec = late_case(tmp_path)
    spec.write_text(spec.read_text().replace("5 seconds", "1 hour").replace("final", "early"))
    result = run_both(spec, tmp_path / "runs")
    assert result.stream == result.batch
    assert table_rows(result.layout.late_events) == []


@pytest.mark.slow
@settings(max_examples=examples(7), deadline=None, suppress_health_check=list(HealthCheck))
@given(timed_changelogs(), window_queries(), st.integers(1, 5))
def test_the_stream_equals_the_batch_without_late_events(spark, events, query, rows_per_batch):
    sql, emit = query
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "t").mkdir()
        (folder / "t" / "000.json").write_text("".join(json.dumps(e) + "\n" for e in events))
        spec = {
            "name": "w",
            "sql": sql,
            "sink": {"emit": emit},
            "stream": {"rows_per_batch": rows_per_batch},
            "sources": {
                "t": {
                    "path": "t",
                    "format": "changelog-json",
                    "schema": TIMED_SCHEMA,
                    "primary_key": ["id"],
                    "event_time": "ts",
                    "watermark": "10 seconds",
                }
            },
        }
        (folder / "w.yaml").write_text(yaml.safe_dump(spec))
        result = run_both(folder / "w.yaml", folder / "runs")
        plan = plan_query(load_spec(folder / "w.yaml"))
        point = json.loads(result.layout.consistency.read_text())["sources"]["t"]
        staged = StagedChangelog(result.layout.staged("t"))
        (late,) = plan.late_windows
        expected = batch_without_late(spark, plan, [LateRead(late.window, "t", staged, point["rows"])])
        if emit == "final":
            closed = f"unix_micros({plan.window_end_sql()}) <= {point['watermark'] or -1}"
            expected = expected.where(closed)
        expected_rows = sorted(expected.toArrow().to_pylist(), key=lambda r: json.dumps(r, default=str))
        stream = sorted(result.stream, key=lambda r: json.dumps(r, default=str))
        assert same_rows(stream, expected_rows), (sql, emit, stream, expected_rows)
        if emit == "early" and not table_rows(result.layout.late_events):
            assert same_rows(result.stream, result.batch)


def test_a_window_named_by_its_end_only_passes_with_early_results(spark, tmp_path):
    # Window [09:01, 09:02) empties: its group is left in the state with no rows. Its start is the
    # end of the live window [09:00, 09:01): matching the state to the sink by start against end
    # would call that live window an emptied group.
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            {"order_id": 1, "pId": 1, "income": 5, "row_time": "2026-11-21 09:00:10", "op": "+I"},
            {"order_id": 2, "pId": 1, "income": 7, "row_time": "2026-11-21 09:01:10", "op": "+I"},
            {"order_id": 2, "pId": 1, "income": 7, "row_time": "2026-11-21 09:01:10", "op": "-D"},
        ],
    )
    spec = write_spec(
        tmp_path,
        """
        name: q
        sql: SELECT window.end AS window_end, SUM(income) AS total FROM orders GROUP BY window(row_time, '1 minute')
        sources:
          orders:
            path: orders
            format: changelog-json
            schema: "order_id BIGINT, pId BIGINT, income BIGINT, row_time TIMESTAMP"
            primary_key: [order_id]
            event_time: row_time
            watermark: "10 minutes"
        sink:
          emit: early
        stream:
          rows_per_batch: 1
        """,
    )
    result = run_both(spec, tmp_path / "runs")
    assert [(r["window_end"].minute, r["total"]) for r in result.stream] == [(1, 5)]
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass", report["samples"]
    assert {e["name"] for e in report["expectations"]} >= {"expect_no_empty_group_in_sink"}


SESSIONS = """
name: sessions
sql: |
  SELECT session_window.start AS s, session_window.end AS e, pId, COUNT(*) AS n, SUM(income) AS total
  FROM orders GROUP BY session_window(row_time, '5 minutes'), pId
sources:
  orders:
    path: orders
    format: changelog-json
    schema: "order_id BIGINT, pId BIGINT, income BIGINT, row_time TIMESTAMP"
    primary_key: [order_id]
    event_time: row_time
    watermark: "30 minutes"
sink:
  emit: {emit}
stream:
  rows_per_batch: 1
"""


def _bridge(tmp_path):
    """Three events of product 1, the middle one bridging the others into one session, then the
    bridge is deleted: the session splits in two, as the batch result has it."""

    def event(order_id, minute, op):
        return {
            "order_id": order_id,
            "pId": 1,
            "income": order_id,
            "row_time": f"2026-11-21 09:{minute:02d}:00",
            "op": op,
        }

    write_changelog(
        tmp_path / "orders", "001.json", [event(1, 0, "+I"), event(2, 4, "+I"), event(3, 8, "+I"), event(2, 4, "-D")]
    )


@pytest.mark.parametrize("emit", ["early", "final"])
def test_a_session_splits_when_the_event_that_bridged_it_is_deleted(spark, tmp_path, emit):
    _bridge(tmp_path)
    spec = write_spec(tmp_path, SESSIONS.format(emit=emit))
    result = run_both(spec, tmp_path / "runs")
    sessions = [(r["s"].minute, r["e"].minute, r["n"], r["total"]) for r in result.stream]
    assert sessions == [(r["s"].minute, r["e"].minute, r["n"], r["total"]) for r in result.batch]
    assert sessions == [(0, 5, 1, 1), (8, 13, 1, 3)]
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass", report["samples"]
    steps = [(kind, s.minute, e.minute) for _, kind, s, e in feed_steps(result.feed, ["s", "e"])]
    if emit == "final":  # each session written once, when the end of the input closed it
        assert steps == [("+I", 0, 5), ("+I", 8, 13)]
    else:  # [0, 5) grows to [0, 9), to [0, 13), and shrinks back when [8, 13) splits off
        assert steps == [
            ("+I", 0, 5),
            ("-U", 0, 5),
            ("+U", 0, 9),
            ("-U", 0, 9),
            ("+U", 0, 13),
            ("-U", 0, 13),
            ("+U", 0, 5),
            ("+I", 8, 13),
        ]


LATE_SESSIONS = """
name: late_sessions
sql: |
  SELECT session_window.start AS s, session_window.end AS e, user, COUNT(*) AS n, SUM(x) AS sx
  FROM clicks GROUP BY session_window(ts, '30 seconds'), user
sources:
  clicks:
    path: clicks
    format: changelog-json
    schema: "id BIGINT, user STRING, x BIGINT, ts TIMESTAMP"
    primary_key: [id]
    event_time: ts
    watermark: "1 minute"
sink:
  emit: final
stream:
  engine: {engine}
  rows_per_batch: 1
"""


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_change_behind_the_watermark_is_late_only_when_its_session_has_closed(spark, tmp_path, engine):
    """User a clicks every 10 s for 100 s: one session [0 s, 130 s), open while the watermark is
    at 40 s. The delete of the click at 10 s is behind the watermark but falls into that session:
    applied, as Flink applies it. User b's click at 5 s forms [5 s, 35 s), which the watermark has
    passed and no open session of b touches: late."""

    def click(id_, user, second, op="+I"):
        ts = f"2026-11-21 09:{second // 60:02d}:{second % 60:02d}"
        return {"id": id_, "user": user, "x": id_, "ts": ts, "op": op}

    clicks = [click(i + 1, "a", second) for i, second in enumerate(range(0, 101, 10))]
    write_changelog(tmp_path / "clicks", "001.json", [*clicks, click(2, "a", 10, "-D"), click(20, "b", 5)])
    spec = write_spec(tmp_path, LATE_SESSIONS.format(engine=engine))
    result = run_both(spec, tmp_path / "runs")
    assert [(r["user"], r["n"], r["sx"]) for r in result.stream] == [("a", 10, 64)]
    assert [(r["user"], r["n"], r["sx"]) for r in result.batch] == [("a", 10, 64), ("b", 1, 20)]
    late = table_rows(result.layout.late_events)
    assert [(r["op"], r["id"], r["window_start"].second, r["window_end"].second) for r in late] == [("+I", 20, 5, 35)]
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "fail" and report["late_events"] == 1
    assert report["late_explanation"]["explains"] == "all"
