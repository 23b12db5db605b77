"""When a change to a session window is late, as Flink judges it, and the record of the changes
left out.

Flink's merging window operator merges a change's own window [ts, ts + gap) with the key's
sessions that it touches, and drops the change only when the merged session has closed: ends at
or before the watermark. So a change behind the watermark that falls into a session still open
(a delete of a click in a session that runs past the watermark) is applied; a change
that starts or joins no open session is late. The key's sessions are the ones before the
micro-batch, formed from its live rows as Spark's session_window forms them (windows that touch
merge).

The local engine runs this module on the driver; the spark engine runs the same rule inside its
keyed state (jobs/stream/jvm/lockstep/stream/SessionLateness.java). Both record the sequence
numbers of the changes they leave out, one Parquet file per micro-batch that left any out,
under the run's state (a replayed micro-batch rewrites its own file); the late-events table and
the batch without late events read that record, so they hold exactly what the stream left out.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT, SEQ, WATERMARK
from jobs.changelog.schema import epoch_micros
from jobs.plan.nodes import SessionAggregate
from jobs.store.files import RunPath, read_parquet_folder, write_parquet


class SessionLateness:
    """The rule for one session aggregate, on Arrow tables of its changes and live rows."""

    def __init__(self, node: SessionAggregate):
        self.keys = node.group_keys
        self.time = node.window.time_col
        self.gap = node.window.size // timedelta(microseconds=1)

    def late(self, changes: pa.Table, before: pa.Table) -> pa.Array:
        """A boolean per change (a table with the time column and WATERMARK): whether it is late
        against the sessions of `before` (the touched keys' live rows, with COUNT)."""
        ts, watermark = epoch_micros(changes.column(self.time)), epoch_micros(changes.column(WATERMARK))
        behind = pc.fill_null(pc.less_equal(pc.add(ts, self.gap), watermark), False)
        if not pc.any(behind).as_py():
            return behind
        sessions = self._sessions(before)
        flags = behind.to_pylist()
        keys, times, marks = self._key_of(changes), ts.to_pylist(), watermark.to_pylist()
        for i in (i for i, flag in enumerate(flags) if flag):
            flags[i] = not any(
                end > marks[i] and start <= times[i] + self.gap and end >= times[i] for start, end in sessions[keys[i]]
            )
        return pa.array(flags, pa.bool_())

    def _sessions(self, rows: pa.Table) -> dict[tuple, list[tuple[int, int]]]:
        """[start, end) of each key's sessions, in microseconds."""
        times: dict[tuple, list[int]] = defaultdict(list)
        live = rows.filter(pc.greater(rows.column(COUNT), 0)) if COUNT in rows.column_names else rows
        for key, ts in zip(self._key_of(live), epoch_micros(live.column(self.time)).to_pylist()):
            if ts is not None:
                times[key].append(ts)
        return defaultdict(list, {key: _merged(sorted(ts), self.gap) for key, ts in times.items()})

    def _key_of(self, rows: pa.Table) -> list[tuple]:
        if not self.keys:
            return [()] * rows.num_rows
        return list(zip(*[rows.column(k).to_pylist() for k in self.keys]))


def _merged(times: list[int], gap: int) -> list[tuple[int, int]]:
    sessions: list[list[int]] = []
    for ts in times:
        if sessions and ts <= sessions[-1][1]:
            sessions[-1][1] = max(sessions[-1][1], ts + gap)
        else:
            sessions.append([ts, ts + gap])
    return [(start, end) for start, end in sessions]


def record_late(folder: RunPath, batch_id: int, seqs: list[int]) -> None:
    """The sequence numbers of the changes a micro-batch left out as late (none: no file)."""
    if not seqs:
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.table({SEQ: pa.array(seqs, pa.int64())}), folder / f"batch-{batch_id}.parquet")


def recorded_late(folder: RunPath) -> list[int]:
    """Every change left out as late so far."""
    if not folder.exists() or not any(folder.glob("*.parquet")):
        return []
    return read_parquet_folder(folder).column(SEQ).to_pylist()
