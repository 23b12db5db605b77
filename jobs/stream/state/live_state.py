"""A keyed operator's input state: the live rows of one input, with their counts, on disk.

Each micro-batch b logs its net changes as `batch-<b>.parquet`. Every `COMPACT_EVERY` logs, the
micro-batch that wrote the last of them folds the newest snapshot and the logs since into
`snapshot-<b + 1>/` (the live rows before micro-batch b + 1, zero counts gone, in parts of key
ranges sorted by key: snapshot_parts.py), so that a micro-batch reads the parts of its touched keys
and at most `COMPACT_EVERY` short logs: the work per batch no longer grows with the length of the
history, and a fold holds one part in memory, not the state.

Exactly-once: micro-batch b reads the newest snapshot numbered b or lower and the logs from there
to b - 1; all of them were complete before b started, so a replay of b reads what b read the
first time. A replayed b rewrites its log and snapshot with the same rows. Files older than the
previous snapshot are deleted once a new snapshot is in place: only the last micro-batch can be
replayed, and it needs at most the previous snapshot and the logs after it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from jobs.runtime.arrow_frames import frame_of
from jobs.stream.state.row_counts import keys_among, live_rows
from jobs.stream.state.snapshot_parts import Snapshot, fold_parts

# Logs folded into a snapshot: more logs make each micro-batch read more small files, fewer make
# the snapshot be rewritten more often.
COMPACT_EVERY = 8
# Rows of logs that make a fold before COMPACT_EVERY logs have gathered: large micro-batches
# (256 MiB of a wide changelog is millions of rows) are folded sooner, so that a fold holds at most
# this many rows of logs, or one micro-batch's, besides a part.
FOLD_ROWS = 4_000_000
# Rows per part of a snapshot: what a fold holds in memory at once (with the logs), about 100 MB of
# Python memory for a group aggregate's sums; fewer rows make more files per snapshot.
PART_ROWS = 1_000_000
_LOG = re.compile(r"batch-(\d+)\.parquet")
_SNAPSHOT = re.compile(r"snapshot-(\d+)")


class LiveState:
    """One input's live rows, as net counts per distinct row, keyed by `keys`."""

    def __init__(
        self,
        directory: Path,
        keys: tuple[str, ...],
        fold: Callable[[pa.Table], pa.Table] = live_rows,
        compact_fold: Callable[[pa.Table], pa.Table] | None = None,
        part_rows: int = PART_ROWS,
        fold_rows: int = FOLD_ROWS,
        counted: bool = False,
    ):
        self.directory, self.keys, self.part_rows, self.fold_rows = directory, keys, part_rows, fold_rows
        # What the rows of a key come to when read back: by default the live rows (summed counts
        # per distinct row, zero counts gone); a group aggregate's sums per group. And what they
        # come to in a snapshot: the same, or less (a group aggregate's state TTL drops idle
        # groups there, which a reader still sees, to retract them).
        self._fold, self._compact_fold = fold, compact_fold or fold
        # A folded part that no log touches comes out of the fold as it went in: it can be kept
        # as it is, unless the snapshot's fold drops rows on its own (by time).
        self._carry = compact_fold is None
        self._read: pa.Table | None = None  # the rows the last rows_before returned
        # The live rows after each micro-batch, for the report (held_rows): a keyed operator's.
        self._count = LiveCount(directory / "live_count.json") if counted else None

    def rows_before(self, batch_id: int, touched: pa.Table | None, like: pa.Schema) -> pa.Table:
        """The live rows before `batch_id` (with their counts) whose keys are among `touched`'s
        rows (None: every key), summed on the driver: the state files are read by Arrow, filtered
        by key there (only the snapshot's parts whose key ranges hold a touched key, and of those
        the row groups whose first key column holds one), and no Spark job runs. `like` is the
        schema of the net changes (toArrow's types), which the files' columns are cast to and the
        result has."""
        snapshot = self._snapshot_for(batch_id)
        logs = self._logs_before(snapshot, batch_id)
        if snapshot is None and not logs:
            self._read = like.empty_table()
            return self._read
        wanted = _keys_as(touched, self.keys, like)
        parts = self._snapshot(snapshot).files_for(wanted) if snapshot else []
        rows = self._fold(_with_keys(_read_arrow(parts + logs, like, wanted), wanted))
        self._read = rows
        return rows

    def record(self, net: pa.Table, batch_id: int) -> None:
        """Log the micro-batch's net changes; compact when enough logs, or enough rows in them,
        have gathered (the logs are what a fold holds whole)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._log_path(batch_id)
        tmp = path.with_suffix(".tmp")
        pq.write_table(net, tmp)
        os.replace(tmp, path)
        change = self._live_change(net)
        logs = self._logs_before(self._snapshot_for(batch_id), batch_id + 1)
        if len(logs) >= COMPACT_EVERY or sum(pq.read_metadata(p).num_rows for p in logs) >= self.fold_rows:
            self._compact(batch_id + 1, net.schema)
            if self._count is not None:
                self._count.set(batch_id, self._snapshot_rows(batch_id + 1))
        elif self._count is not None:
            self._count.add(batch_id, change)

    def _live_change(self, log: pa.Table) -> int:
        """How many live rows the log adds to (or takes from) the rows the last rows_before read:
        the log's rows are all of keys it read."""
        read, self._read = self._read, None
        if self._count is None:
            return 0
        read = read if read is not None else log.schema.empty_table()
        return self._fold(pa.concat_tables([read, log.select(read.column_names)])).num_rows - read.num_rows

    def held_rows(self) -> int:
        """The live rows the state holds after the last micro-batch recorded: the report's state
        figure. Kept as a running count (live_count.json): each micro-batch adds what its log
        changed in the rows it read, and a fold sets it to the rows of the new snapshot (which
        leaves out what a compact_fold dropped)."""
        return self._count.rows if self._count is not None else 0

    def frame(self, spark: SparkSession, table: pa.Table) -> DataFrame:
        """Rows computed on the driver (in the state's columns) as a frame to go on from: a local
        relation, even with no rows, which Spark's optimizer then drops from joins and unions (an
        empty frame of an RDD cost a first micro-batch's join two shuffle jobs over nothing)."""
        return frame_of(spark, table)

    def _compact(self, snapshot: int, like: pa.Schema) -> None:
        """Write snapshot-<snapshot>: every live row before that micro-batch, summed on the driver
        as Spark groups (zero counts dropped), in parts of key ranges folded one at a time. On
        the driver because the micro-batches of a keyed operator otherwise run no Spark job: this
        fold, when it ran in Spark every eighth micro-batch, was a third of the keyed
        micro-batches' time in `bench_microbatch`."""
        old = self._snapshot_for(snapshot)
        logs = _read_arrow(self._logs_before(old, snapshot), like, None)
        target, tmp = self._snapshot_path(snapshot), self.directory / f".snapshot-{snapshot:012d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        fold_parts(
            self._snapshot(old) if old else None,
            logs,
            self.keys,
            self._compact_fold,
            lambda files: _read_arrow(files, like, None),
            tmp,
            self.part_rows,
            self._carry,
        )
        shutil.rmtree(target, ignore_errors=True)  # a replayed micro-batch's earlier attempt
        os.replace(tmp, target)
        self._forget_before(snapshot)

    def _snapshot_rows(self, snapshot: int) -> int:
        folder = self._snapshot_path(snapshot)
        parts = list(folder.glob("part-*.parquet")) or list(folder.glob("*.parquet"))  # an old snapshot: Spark's files
        return sum(pq.read_metadata(f).num_rows for f in parts)

    def _forget_before(self, snapshot: int) -> None:
        """Delete what no micro-batch from `snapshot` on (nor a replay of the one before) reads."""
        older = [s for s in self._snapshots() if s < snapshot]
        keep_from = older[-1] if older else 0
        for s in older[:-1]:
            shutil.rmtree(self._snapshot_path(s), ignore_errors=True)
        for b in self._logs():
            if b < keep_from:
                self._log_path(b).unlink(missing_ok=True)

    def _logs_before(self, snapshot: int | None, batch_id: int) -> list[str]:
        """The logs a reader of `batch_id` adds to `snapshot`."""
        return [str(self._log_path(b)) for b in self._logs() if (snapshot or 0) <= b < batch_id]

    def _snapshot(self, snapshot: int) -> Snapshot:
        return Snapshot(self._snapshot_path(snapshot), self.keys)

    def _snapshot_for(self, batch_id: int) -> int | None:
        found = [s for s in self._snapshots() if s <= batch_id]
        return found[-1] if found else None

    def _snapshots(self) -> list[int]:
        return self._numbered(_SNAPSHOT)

    def _logs(self) -> list[int]:
        return self._numbered(_LOG)

    def _numbered(self, pattern: re.Pattern) -> list[int]:
        return numbered_files(self.directory, pattern)

    def _log_path(self, batch_id: int) -> Path:
        return self.directory / f"batch-{batch_id:012d}.parquet"

    def _snapshot_path(self, snapshot: int) -> Path:
        return self.directory / f"snapshot-{snapshot:012d}"


class LiveCount:
    """A state's live rows after each micro-batch, kept in a small file: the count after the
    last micro-batch recorded and the one before it (a replayed micro-batch starts from that)."""

    def __init__(self, path: Path):
        self.path = path
        saved = json.loads(path.read_text()) if path.exists() else {}
        self.batch, self.rows, self.before = saved.get("batch", -1), saved.get("rows", 0), saved.get("before", 0)

    def add(self, batch_id: int, change: int) -> None:
        base = self.before if batch_id == self.batch else self.rows
        self.set(batch_id, base + change)

    def set(self, batch_id: int, rows: int) -> None:
        before = self.before if batch_id == self.batch else self.rows
        self.batch, self.rows, self.before = batch_id, rows, before
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch": batch_id, "rows": rows, "before": before}))
        os.replace(tmp, self.path)


def _keys_as(touched: pa.Table | None, keys: tuple[str, ...], like: pa.Schema) -> pa.Table | None:
    """The touched keys in the state's key types. None, meaning every row is read, without touched
    keys or when they do not cast (a join's other side of another type): reading more rows than
    needed is safe, fewer would not be."""
    if touched is None or not keys:
        return None
    try:
        return pa.table([touched.column(k).cast(like.field(k).type) for k in keys], names=list(keys))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _read_arrow(paths: list[str], like: pa.Schema, wanted: pa.Table | None) -> pa.Table:
    """The rows of the state files (a snapshot folder written by Spark, logs by Arrow), in the
    types of `like`. With wanted keys, a file's row groups whose first key column holds none of
    the wanted values are not read."""
    if not paths:
        return like.empty_table()
    where = _first_key_filter(wanted)
    return pa.concat_tables([_as(_read_file(path, where), like) for path in paths])


def _read_file(path: str, where) -> pa.Table:
    """A state file's rows that `where` keeps. A file of one row group (every log, a small
    part) is read whole on this thread and filtered in memory: an Arrow dataset scan costs about
    a millisecond more per file, and a keyed micro-batch reads several (a join's, nine). A file
    of several row groups is scanned, on Arrow's threads, skipping the groups whose statistics
    rule out every wanted key. So is a folder (a snapshot Spark wrote)."""
    if os.path.isdir(path):
        return _scan(path, where)
    with pq.ParquetFile(path) as file:
        if file.metadata.num_row_groups > 1:
            return _scan(path, where)
        rows = file.read(use_threads=False)
    if where is None:
        return rows
    try:
        return rows.filter(where)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return rows  # a key type the filter cannot compare as stored: all of it


def _scan(path: str, where) -> pa.Table:
    dataset = ds.dataset(path, format="parquet")
    if where is None:
        return dataset.to_table()
    try:
        return dataset.to_table(filter=where)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return dataset.to_table()  # a key type the filter cannot compare as stored: read it all


def _first_key_filter(wanted: pa.Table | None):
    """A filter that keeps every row whose first key column is among the wanted ones (a
    superset of the rows wanted: the other key columns are compared exactly afterwards)."""
    if wanted is None:
        return None
    name, column = wanted.column_names[0], wanted.column(0)
    if pa.types.is_floating(column.type):
        return None  # -0.0 and 0.0 are one key to Spark but two values to a row-group filter
    values = pc.unique(pc.drop_null(column))
    where = ds.field(name).isin(values) if len(values) else None
    if column.null_count:
        nulls = ds.field(name).is_null()
        where = nulls if where is None else where | nulls
    return where if where is not None else ds.scalar(False)


def _as(table: pa.Table, like: pa.Schema) -> pa.Table:
    """`table`'s columns in `like`'s types (a snapshot written by Spark stores timestamps as
    INT96, which Arrow reads as nanoseconds without a zone)."""
    return pa.table([table.column(f.name).cast(f.type) for f in like], schema=like)


def _with_keys(rows: pa.Table, wanted: pa.Table | None) -> pa.Table:
    """The rows whose keys equal a wanted row's (row_counts.keys_among)."""
    if wanted is None or rows.num_rows == 0:
        return rows
    return rows.filter(pa.array(keys_among(rows, wanted, tuple(wanted.column_names))))


def numbered_files(directory: Path, pattern: re.Pattern) -> list[int]:
    """The numbers of `directory`'s files whose names match `pattern` (its one group: a
    micro-batch or snapshot number), in order; none when the directory is not there yet."""
    if not directory.exists():
        return []
    names = (pattern.fullmatch(p.name) for p in directory.iterdir())
    return sorted(int(m.group(1)) for m in names if m)
