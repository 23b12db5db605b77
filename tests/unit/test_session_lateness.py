"""When a change to a session window is late (jobs/stream/operators/session/lateness.py): as Flink
judges it, after merging with the key's sessions, not by the change's own event time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pyarrow as pa

from jobs.changelog.columns import COUNT, WATERMARK
from jobs.stream.operators.session.lateness import SessionLateness

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
RULE = SessionLateness(
    SimpleNamespace(group_keys=("u",), window=SimpleNamespace(time_col="ts", size=timedelta(seconds=30)))
)


def at(second: float) -> datetime:
    return T0 + timedelta(seconds=second)


def changes(*rows: tuple[str, float, float | None]) -> pa.Table:
    """(user, event time, watermark) in seconds."""
    stamp = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "u": [u for u, _, _ in rows],
            "ts": pa.array([at(t) for _, t, _ in rows], stamp),
            WATERMARK: pa.array([None if w is None else at(w) for _, _, w in rows], stamp),
        }
    )


def live(*rows: tuple[str, float]) -> pa.Table:
    return pa.table(
        {
            "u": [u for u, _ in rows],
            "ts": pa.array([at(t) for _, t in rows], pa.timestamp("us", tz="UTC")),
            COUNT: [1] * len(rows),
        }
    )


def test_a_change_whose_own_window_ends_after_the_watermark_is_on_time():
    assert RULE.late(changes(("a", 20, 40), ("a", 10, 40)), live()).to_pylist() == [False, True]


def test_a_change_behind_the_watermark_in_an_open_session_of_its_key_is_on_time():
    state = live(("a", 0), ("a", 20), ("a", 40))  # [0, 70): open at 40
    late = RULE.late(changes(("a", 5, 40), ("b", 5, 40)), state)
    assert late.to_pylist() == [False, True]  # b has no session open


def test_a_closed_session_takes_no_more_changes():
    state = live(("a", 0), ("a", 5))  # [0, 35): closed at 40
    assert RULE.late(changes(("a", 2, 40)), state).to_pylist() == [True]


def test_a_window_that_touches_an_open_session_merges_with_it():
    state = live(("a", 60))  # [60, 90)
    assert RULE.late(changes(("a", 30, 70), ("a", 29.999, 70)), state).to_pylist() == [False, True]


def test_without_a_watermark_nothing_is_late():
    assert RULE.late(changes(("a", 0, None)), live()).to_pylist() == [False]
