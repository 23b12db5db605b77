"""The harness's changes behind the watermark (late_changes.py): each window kind gets some that
both watermarks drop and some whose window is still open, and a dropped change stays out of the
rows a batch reference is computed from."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from tests.differential.generate import generate


def _behind_the_watermark(case) -> Counter:
    """(query family, dropped or applied) of every change behind Flink's watermark."""
    source, found = case.sources[0], Counter()
    family = case.query_class.split("_")[0]
    latest = None
    for i, (_, *values) in enumerate(source.rows):
        ts = datetime.fromisoformat(values[-1])
        if latest is not None and ts <= latest - timedelta(milliseconds=source.watermark_ms):
            found[(family, "dropped" if i in source.late else "applied")] += 1
        latest = ts if latest is None else max(latest, ts)
    return found


def test_every_window_kind_gets_late_changes_both_dropped_and_applied():
    found = Counter()
    for seed in range(300, 400):
        found += _behind_the_watermark(generate("window", seed))
        found += _behind_the_watermark(generate("session_window", seed))
    for family in ("tumble", "hop", "session"):
        assert found[(family, "dropped")] > 0 and found[(family, "applied")] > 0, found


def test_a_dropped_change_is_left_out_of_the_final_rows():
    case = next(c for c in (generate("session_window", s) for s in range(300, 400)) if c.sources[0].late)
    source = case.sources[0]
    dropped = [source.rows[i][1:] for i in source.late]
    final = [row[1:] for row in source.final_rows()]
    assert dropped and not any(row in final for row in dropped)
