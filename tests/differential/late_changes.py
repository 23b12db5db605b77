"""Changes behind the watermark, for the window classes, made so that Flink (watermark after every
row) and lockstep (watermark between micro-batches) judge each the same way: its window closed
for both (dropped, listed in the source's `late`), or still open for both (applied). A candidate
that the two watermarks would judge differently is not generated.

Windows (tumbling, hopping): late inserts and deletes whose windows all end at or before
lockstep's watermark, or all after Flink's. Sessions: inserts long before any event, which start
a session the watermark has closed (dropped), and deletes behind the watermark of rows whose
session, as lockstep's state holds it at the micro-batch's start, ends after Flink's watermark
(applied: Flink's sessions, which never shrink, hold at least that session).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tests.differential.changelogs import START, ChangelogBuilder

MINUTE_MS = 60_000


@dataclass
class WindowLateness:
    size_ms: int
    slide_ms: int
    share: float = 0.08
    inserts_only: bool = False  # an insert-only source: late inserts only

    def change(self, builder: ChangelogBuilder) -> None:
        timing, rng = builder.timing, builder.rng
        assert timing is not None and builder.time_column is not None
        behind = [r for r in builder.live if not timing.on_time(r[builder.time_column])]
        if behind and not self.inserts_only and rng.random() < 0.5:
            row = rng.choice(behind)
            verdict = self._verdict(row[builder.time_column], timing)
            if verdict is not None:
                builder.late_delete(row, dropped=verdict)
            return
        watermark = timing.watermark()
        assert watermark is not None
        row = builder.values(rng)
        row[builder.time_column] = watermark - timedelta(milliseconds=rng.randint(0, 2 * self.size_ms))
        verdict = self._verdict(row[builder.time_column], timing)
        if verdict is not None:
            builder.late_insert(row, dropped=verdict)

    def _verdict(self, ts: datetime, timing) -> bool | None:
        """True: every window of `ts` closed for both; False: every one open for both."""
        ends = self._window_ends(ts)
        ours, flinks = timing.lockstep_watermark(), timing.watermark()
        if ours is not None and all(end <= ours for end in ends):
            return True
        if all(end > flinks for end in ends):
            return False
        return None

    def _window_ends(self, ts: datetime) -> list[datetime]:
        offset = (ts - START) // timedelta(milliseconds=1)
        last_start = START + timedelta(milliseconds=offset - offset % self.slide_ms)
        starts = [last_start - timedelta(milliseconds=k * self.slide_ms) for k in range(self.size_ms // self.slide_ms)]
        return [start + timedelta(milliseconds=self.size_ms) for start in starts]


@dataclass
class SessionLateness:
    gap_ms: int
    key: str | None  # the session's key column (None: one key)
    share: float = 0.08

    def change(self, builder: ChangelogBuilder) -> None:
        timing, rng = builder.timing, builder.rng
        assert timing is not None and builder.time_column is not None
        if rng.random() < 0.5:
            if timing.lockstep_watermark() is None:
                return  # lockstep's first micro-batch has no watermark: nothing is late in it
            row = builder.values(rng)  # an hour before any event: no session there, ever
            row[builder.time_column] = START - timedelta(hours=1) + timedelta(milliseconds=rng.randint(0, MINUTE_MS))
            builder.late_insert(row, dropped=True)
            return
        behind = [r for r in builder.live if not timing.on_time(r[builder.time_column])]
        open_ = [r for r in behind if self._in_open_session(r, builder)]
        if open_:
            builder.late_delete(rng.choice(open_), dropped=False)

    def _in_open_session(self, row: dict, builder: ChangelogBuilder) -> bool:
        """Whether the row's session in lockstep's state (the micro-batch's start) ends after
        Flink's watermark."""
        if not any(r is row for r in builder.live_at_batch_start):
            return False
        time = builder.time_column
        times = sorted(r[time] for r in builder.live_at_batch_start if self._key(r) == self._key(row))
        gap = timedelta(milliseconds=self.gap_ms)
        start, end = times[0], times[0] + gap
        for ts in times[1:]:
            if ts > end:
                if start <= row[time] < end:
                    break
                start, end = ts, ts + gap
            else:
                end = max(end, ts + gap)
        return start <= row[time] < end and end > builder.timing.watermark()

    def _key(self, row: dict):
        return row.get(self.key) if self.key else None
