"""Cutting staged rows into segments, one micro-batch each, while the changelog is parsed.

A staging run hands its rows over a block at a time; a segment is written as soon as its rows and
the row after it are known, so staging holds a block and one segment in memory, not the whole
run's rows. Segments are written to pending/ and moved to segments/ (where Spark's file source
looks) at the commit, just before the manifest that lists them: a run that fails, or never
commits, leaves nothing in segments/ that the stream would read. The next staging run clears what
such a run left.

A segment never ends right after a -U, so an update's before- and after-image land in the same
micro-batch. The file source takes files in modification-time order, so each segment's mtime is
set to its ordinal: the order is the changelog's, whatever the clock did.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.changelog.columns import FILE, KIND, SEQ, WATERMARK
from jobs.changelog.kafka_source import partition_of_piece
from jobs.changelog.kinds import RowKind
from jobs.spec.intervals import parse_interval
from jobs.spec.model import StreamSpec

SEGMENTS = "segments"
# Parquet's dictionary only for the file name (one value per file): a changelog's other columns
# are mostly distinct values, whose dictionaries cost time to build and to read (a 1.8 M-row
# segment: written in 0.18 s against 0.32 s, read in 0.18 s against 0.29 s).
DICTIONARY_COLUMNS = [FILE]
PENDING = "pending"
# Segment k's mtime is SEGMENT_EPOCH + k seconds (2001-09-09): ordered, and far from any real file.
SEGMENT_EPOCH = 1_000_000_000


def segment_name(first_seq: int) -> str:
    return f"seg-{first_seq:012d}.parquet"


def put_in_order(path: Path, ordinal: int) -> None:
    """Give segment `ordinal` its place in the file source's modification-time order."""
    os.utime(path, (SEGMENT_EPOCH + ordinal, SEGMENT_EPOCH + ordinal))


class Watermark:
    """The watermark as the stream will see it: before a micro-batch, the largest event time of
    all earlier micro-batches minus the allowed out-of-orderness. Computed here, where the
    micro-batches are cut, so that lateness is decided once and the same way on every run.

    A Kafka topic's watermark is per partition, as Flink's Kafka source keeps it: the smallest of
    the partitions' largest event times, a partition not read yet holding it back. A topic is
    staged a partition after another, so one partition's rows are never late against another's.
    """

    def __init__(
        self,
        column: str,
        delay_micros: int,
        max_seen: int | None,
        floor: int | None = None,
        partitions: tuple[int, ...] | None = None,
        max_by_partition: dict[int, int] | None = None,
    ):
        self.column, self.delay, self.max_seen, self.floor = column, delay_micros, max_seen, floor
        self.partitions, self.max_by_partition = partitions, dict(max_by_partition or {})

    @classmethod
    def of(cls, manifest: dict, partitions: tuple[int, ...] | None = None) -> Watermark | None:
        if not manifest["event_time"]:
            return None
        delay = parse_interval(manifest["watermark"]) // timedelta(microseconds=1)
        by_partition = {int(p): m for p, m in (manifest.get("max_event_time_by_partition") or {}).items()}
        return cls(
            manifest["event_time"],
            delay,
            manifest.get("max_event_time"),
            manifest.get("watermark_floor"),
            partitions,
            by_partition,
        )

    def current(self) -> int | None:
        """The event-time watermark, never below the floor the end of a bounded input left."""
        marks = [m for m in (self._from_events(), self.floor) if m is not None]
        return max(marks) if marks else None

    def _from_events(self) -> int | None:
        if self.partitions is None:
            return None if self.max_seen is None else self.max_seen - self.delay
        maxima = [self.max_by_partition.get(p) for p in self.partitions]
        return None if not maxima or None in maxima else min(m for m in maxima if m is not None) - self.delay

    def stamp(self, piece: pa.Table) -> pa.Table:
        """Add __wm (the watermark in effect for this micro-batch), then advance past it."""
        current = self.current()
        time_type = piece.schema.field(self.column).type
        marks = pa.array([current] * piece.num_rows, pa.int64()).cast(time_type)
        stamped = piece.append_column(WATERMARK, marks)
        latest = pc.max(piece.column(self.column)).cast(pa.int64()).as_py()
        if latest is not None:
            self.max_seen = latest if self.max_seen is None else max(self.max_seen, latest)
        if self.partitions is not None:
            self._advance_partitions(piece)
        return stamped

    def _advance_partitions(self, piece: pa.Table) -> None:
        for name in pc.unique(piece.column(FILE)).to_pylist():
            rows = piece.filter(pc.equal(piece.column(FILE), name))
            latest = pc.max(rows.column(self.column)).cast(pa.int64()).as_py()
            if latest is not None:
                partition = partition_of_piece(name)
                self.max_by_partition[partition] = max(latest, self.max_by_partition.get(partition, latest))


class SegmentWriter:
    """Takes a staging run's rows in changelog order and writes them as segments of about the
    size `batch_size` asks for (its row count, or its megabytes at the first block's bytes per
    row)."""

    def __init__(self, directory: Path, ordinal: int, batch_size: StreamSpec, watermark: Watermark | None):
        self.directory, self.ordinal, self.batch_size, self.watermark = directory, ordinal, batch_size, watermark
        self.rows_per_batch: int | None = None
        self.rest: pa.Table | None = None  # rows not in a segment yet
        self.written: list[dict] = []

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        if self.rows_per_batch is None:
            self.rows_per_batch = self.batch_size.rows_for(rows.num_rows, rows.nbytes)
        self.rest = rows if self.rest is None else pa.concat_tables([self.rest, rows])
        self._cut(self.rest, self.rows_per_batch, final=False)

    def close(self) -> list[dict]:
        """Write the last segment (still in pending/): every segment's manifest entry."""
        if self.rest is not None and self.rows_per_batch is not None:  # the first rows set both
            self._cut(self.rest, self.rows_per_batch, final=True)
        return self.written

    def discard(self) -> None:
        shutil.rmtree(self.directory / PENDING, ignore_errors=True)

    def _cut(self, rest: pa.Table, rows_per_batch: int, final: bool) -> None:
        """Segments from the rows at hand (`rest`); before the last block, one that reaches their
        end waits (the next rows may continue an update, or the segment)."""
        kinds = rest.column(KIND).to_numpy()
        start = 0
        while start < len(kinds):
            end = min(start + rows_per_batch, len(kinds))
            while end < len(kinds) and kinds[end - 1] == RowKind.UPDATE_BEFORE:
                end += 1
            if end == len(kinds) and not final:
                break
            self._write(rest.slice(start, end - start))
            start = end
        self.rest = rest.slice(start)

    def _write(self, piece: pa.Table) -> None:
        entry = {"first_seq": piece.column(SEQ)[0].as_py(), "rows": piece.num_rows}
        if self.watermark is not None:
            piece = self.watermark.stamp(piece)
            entry.update(watermark_after=self.watermark.current(), max_event_time=self.watermark.max_seen)
            if self.watermark.partitions is not None:
                entry["max_by_partition"] = {str(p): m for p, m in sorted(self.watermark.max_by_partition.items())}
        pending = self.directory / PENDING
        pending.mkdir(parents=True, exist_ok=True)
        path = pending / segment_name(entry["first_seq"])
        pq.write_table(piece, path, use_dictionary=DICTIONARY_COLUMNS)
        put_in_order(path, self.ordinal)
        self.written.append({"file": f"{SEGMENTS}/{path.name}", **entry})
        self.ordinal += 1


def move_to_segments(directory: Path, written: list[dict]) -> None:
    """The commit's part: a closed writer's segments from pending/ into segments/."""
    target = directory / SEGMENTS
    target.mkdir(parents=True, exist_ok=True)
    for entry in written:
        name = Path(entry["file"]).name
        os.replace(directory / PENDING / name, target / name)  # keeps the ordinal mtime


def clear_uncommitted(directory: Path, manifest: dict) -> None:
    """What a staging run that failed or crashed before its manifest left: its pending folder,
    and segments it had moved that the manifest does not list (the stream would read them)."""
    shutil.rmtree(directory / PENDING, ignore_errors=True)
    listed = {Path(segment["file"]).name for segment in manifest["segments"]}
    folder = directory / SEGMENTS
    for path in folder.iterdir() if folder.is_dir() else ():
        if path.name not in listed:
            path.unlink()
