"""Random changelogs that a CDC source could have produced: inserts, updates as -U/+U pairs and
deletes, keys that go and come back, NULLs in every nullable column.

With a primary key, a -U/-D retracts exactly the key's live image; without one, an identical live
copy. With event time, rows arrive out of order but never late: each row's event time (a
retraction's too) is after the watermark in force when it arrives, the largest event time seen so
far minus the allowed lateness. Flink moves its watermark after every row, lockstep after every
micro-batch, so a row on time for Flink is on time for lockstep as well.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

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
    clock: datetime = START
    max_seen: datetime | None = None

    def watermark(self) -> datetime | None:
        return None if self.max_seen is None else self.max_seen - timedelta(milliseconds=self.watermark_ms)

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

    def saw(self, moment: datetime) -> None:
        self.max_seen = moment if self.max_seen is None else max(self.max_seen, moment)


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
    ):
        self.rng, self.columns, self.values, self.key = rng, columns, values, key
        self.time_column, self.timing = time_column, timing
        self.key_space = key_space
        self.live: list[dict] = []
        self.rows: list[list] = []

    def build(self, changes: int, insert_only: bool = False) -> list[list]:
        for _ in range(changes):
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
            free = sorted(set(range(1, self.key_space + 1)) - {r[self.key] for r in self.live})
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

    def _emit(self, kind: str, row: dict) -> None:
        values = [row.get(c) for c in self.columns]
        self.rows.append(
            [kind, *[v.isoformat(timespec="milliseconds") if isinstance(v, datetime) else v for v in values]]
        )
        if self.time_column:
            self.timing.saw(row[self.time_column])


class CaseRandom(random.Random):
    """The random source of one case, with the largest changelog it may make."""

    def __init__(self, seed: str, max_rows: int):
        super().__init__(seed)
        self.max_rows = max_rows


def size(rng: random.Random, low: int = 3, high: int = 3000) -> int:
    """Log-uniform: as many small changelogs as large ones."""
    high = max(low, min(high, getattr(rng, "max_rows", high)))
    return int(round(low * (high / low) ** rng.random()))
