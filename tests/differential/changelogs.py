"""Random changelogs that a CDC source could have produced: inserts, updates as -U/+U pairs and
deletes, keys that go and come back, NULLs in every nullable column.

With a primary key, a -U/-D retracts exactly the key's live image; without one, an identical live
copy. With event time, rows arrive out of order: each row's event time (a retraction's too) is
after the watermark in force when it arrives, the largest event time seen so far minus the allowed
lateness. Flink moves its watermark after every row, lockstep after every micro-batch, so a row on
time for Flink is on time for lockstep as well. With `late` (late_changes.py), a share of the
changes are behind both watermarks: some whose window has closed (Flink and lockstep drop them,
and the source lists them in `late`), some whose window is still open (both apply them).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

START = datetime(2026, 11, 21, 9, 0, 0)

Values = Callable[[random.Random], dict]  # a row's non-key, non-time values


def maybe(rng: random.Random, value, null_share: float = 0.12):
    return None if rng.random() < null_share else value


def bigint(rng: random.Random, low: int = -20, high: int = 100):
    return maybe(rng, rng.randint(low, high))


def double(rng: random.Random):
    return maybe(rng, rng.randint(-40, 400) / 4)  # quarters: sums stay exact in binary


def decimal(rng: random.Random):
    return maybe(rng, str(Decimal(rng.randint(-2000, 90000)) / 100))


def group(rng: random.Random, domain: str = "abcd"):
    return maybe(rng, rng.choice(domain), null_share=0.08)


@dataclass
class Timing:
    watermark_ms: int
    batch_rows: int = 1  # lockstep's rows per micro-batch: its watermark moves between micro-batches
    clock: datetime = START
    max_seen: datetime | None = None  # Flink's: every row so far
    max_of_batches: datetime | None = None  # lockstep's: the rows of its finished micro-batches
    _batch_max: datetime | None = None
    _in_batch: int = 0

    def watermark(self) -> datetime | None:
        """Flink's watermark, as a window's end compares with it (a window ending at or before it
        has fired)."""
        return None if self.max_seen is None else self.max_seen - timedelta(milliseconds=self.watermark_ms)

    def lockstep_watermark(self) -> datetime | None:
        """lockstep's watermark for the micro-batch being filled (never after Flink's)."""
        late = self.max_of_batches
        return None if late is None else late - timedelta(milliseconds=self.watermark_ms)

    def next_time(self, rng: random.Random) -> datetime:
        """An event time after the watermark: mostly ahead, sometimes a little behind."""
        self.clock += timedelta(milliseconds=rng.randint(0, 2500))
        earliest = self.watermark()
        behind = rng.randint(0, self.watermark_ms // 2) if rng.random() < 0.3 else 0
        moment = self.clock - timedelta(milliseconds=behind)
        if earliest is not None and moment <= earliest:
            moment = earliest + timedelta(milliseconds=1)
        return moment

    def on_time(self, moment: datetime) -> bool:
        earliest = self.watermark()
        return earliest is None or moment > earliest

    def saw(self, moment: datetime, kind: str) -> bool:
        """Note a row; True when it ends one of lockstep's micro-batches (which never end after a
        -U, jobs/changelog/segments.py)."""
        self.max_seen = moment if self.max_seen is None else max(self.max_seen, moment)
        self._batch_max = moment if self._batch_max is None else max(self._batch_max, moment)
        self._in_batch += 1
        if self._in_batch < self.batch_rows or kind == "-U":
            return False
        self.max_of_batches = (
            self._batch_max if self.max_of_batches is None else max(self.max_of_batches, self._batch_max)
        )
        self._in_batch = 0
        return True


class LateChanges(Protocol):
    share: float  # of the changes

    def change(self, builder: ChangelogBuilder) -> None: ...


class ChangelogBuilder:
    """Rows [kind, value, ...] in the column order given; `key`: the primary key column (None:
    a source without one); `time_column` with `timing`: an event-time source."""

    def __init__(
        self,
        rng: random.Random,
        columns: list[str],
        values: Values,
        key: str | None,
        time_column: str | None = None,
        timing: Timing | None = None,
        key_space: int = 40,
        late: LateChanges | None = None,
    ):
        self.rng, self.columns, self.values, self.key = rng, columns, values, key
        self.time_column, self.timing, self.late = time_column, timing, late
        self.key_space = key_space
        self.live: list[dict] = []
        self.live_at_batch_start: list[dict] = []  # what lockstep's state holds for the micro-batch
        self.rows: list[list] = []
        self.late_rows: list[int] = []  # the changes both Flink and lockstep drop
        self.retired: set = set()  # keys whose dropped delete left their row live in the stream
        self._late_ids = iter(range(10**6, 10**7))
        self._batch_ended = False

    def build(self, changes: int, insert_only: bool = False) -> list[list]:
        for _ in range(changes):
            if self._batch_ended:
                self.live_at_batch_start, self._batch_ended = list(self.live), False
            if self.late and self.timing and self.timing.max_seen and self.rng.random() < self.late.share:
                self.late.change(self)
                continue
            action = (
                "insert"
                if insert_only or not self.live
                else self.rng.choices(["insert", "update", "delete"], weights=[55, 28, 17])[0]
            )
            {"insert": self._insert, "update": self._update, "delete": self._delete}[action]()
        return self.rows

    def _new_row(self) -> dict | None:
        row = self.values(self.rng)
        if self.key is not None:
            free = sorted(set(range(1, self.key_space + 1)) - {r[self.key] for r in self.live} - self.retired)
            if not free:
                return None
            row[self.key] = self.rng.choice(free)
        if self.time_column:
            row[self.time_column] = self.timing.next_time(self.rng)
        return row

    def _insert(self) -> None:
        row = self._new_row()
        if row is not None:
            self._emit("+I", row)
            self.live.append(row)

    def _update(self) -> None:
        old = self._retractable()
        if old is None:
            return self._insert()
        new = self.values(self.rng)
        if self.key is not None:
            new[self.key] = old[self.key]
        if self.time_column:
            new[self.time_column] = (
                self.timing.next_time(self.rng) if self.rng.random() < 0.5 else old[self.time_column]
            )
        self._emit("-U", old)
        self._emit("+U", new)
        self.live[self.live.index(old)] = new

    def _delete(self) -> None:
        old = self._retractable()
        if old is None:
            return self._insert()
        self._emit("-D", old)
        self.live.remove(old)

    def _retractable(self) -> dict | None:
        """A live row whose retraction is on time (any live row without event time)."""
        if not self.time_column:
            return self.rng.choice(self.live)
        candidates = [r for r in self.live if self.timing.on_time(r[self.time_column])]
        return self.rng.choice(candidates) if candidates else None

    def late_insert(self, row: dict, dropped: bool) -> None:
        """An insert behind the watermark (with a key of its own, never used again)."""
        if self.key is not None:
            row[self.key] = next(self._late_ids)
        self._emit("+I", row)
        if dropped:
            self.late_rows.append(len(self.rows) - 1)
        else:
            self.live.append(row)

    def late_delete(self, row: dict, dropped: bool) -> None:
        """The delete of a live row behind the watermark: a dropped one leaves the row live in the
        stream, so its key is not used again."""
        self._emit("-D", row)
        self.live.remove(row)
        if dropped:
            self.late_rows.append(len(self.rows) - 1)
            self.retired.add(row.get(self.key))

    def _emit(self, kind: str, row: dict) -> None:
        values = [row.get(c) for c in self.columns]
        self.rows.append(
            [kind, *[v.isoformat(timespec="milliseconds") if isinstance(v, datetime) else v for v in values]]
        )
        if self.time_column and self.timing.saw(row[self.time_column], kind):
            self._batch_ended = True  # a change's rows are all emitted before its live rows change


class CaseRandom(random.Random):
    """The random source of one case, with the largest changelog it may make."""

    def __init__(self, seed: str, max_rows: int):
        super().__init__(seed)
        self.max_rows = max_rows


def size(rng: random.Random, low: int = 3, high: int = 3000) -> int:
    """Log-uniform: as many small changelogs as large ones."""
    high = max(low, min(high, getattr(rng, "max_rows", high)))
    return int(round(low * (high / low) ** rng.random()))
