"""What each micro-batch read, from Spark's own checkpoint.

The staged changelog reaches Spark as segment files, one per micro-batch; Spark's file source logs
the files it finds under checkpoint/sources/<i>/ (one entry per find, compacted every ten entries
into <entry>.compact), and the offset log records the entry each micro-batch read up to. From the
two come the rows a micro-batch covered, the check that segments were taken in changelog order, and
the consistency point.

The file source numbers its entries itself, and they are not the micro-batch ids: it writes an
entry when it finds a file, before the micro-batch's offset is recorded, so a run killed between
the two leaves an entry no micro-batch read. Before the next run starts, that entry is emptied
(spark_logs.forget_unplanned_finds); the restarted run's next micro-batch reads it and the next
entry, which holds the segment found again (its offset jumps by two), and from then on entry n
belongs to micro-batch n - 1. So a micro-batch's files are the entries after the previous
micro-batch's offset up to its own.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from jobs.changelog.staging import StagedChangelog
from jobs.errors import RunStateError
from jobs.store.files import RunPath


def committed_batches(checkpoint: RunPath) -> list[int]:
    """The ids of the micro-batches Spark recorded as done, in order."""
    return _batch_ids(checkpoint / "commits")


def planned_batches(checkpoint: RunPath) -> list[int]:
    """The ids of the micro-batches Spark planned (recorded an offset for), in order."""
    return _batch_ids(checkpoint / "offsets")


def recorded_conf(checkpoint: RunPath) -> dict[str, str] | None:
    """The Spark settings the query's newest offset log entry records (Spark writes them at the
    first micro-batch and carries them over to every later one); None before any micro-batch."""
    offsets = checkpoint / "offsets"
    planned = planned_batches(checkpoint)
    if not planned:
        return None
    for line in (offsets / str(planned[-1])).read_text().splitlines():
        if line.startswith("{") and '"conf"' in line:
            return json.loads(line)["conf"]
    return None


def batch_timestamp_ms(checkpoint: RunPath, batch_id: int) -> int:
    """Spark's time of a micro-batch (milliseconds since the epoch), which its offset log entry
    records when the micro-batch is planned: a replay of it has the same."""
    entry = checkpoint / "offsets" / str(batch_id)
    for line in entry.read_text().splitlines() if entry.exists() else ():
        if line.startswith("{") and '"batchTimestampMs"' in line:
            return int(json.loads(line)["batchTimestampMs"])
    raise RunStateError(f"Spark's offset log has no time for micro-batch {batch_id}", where=str(entry))


def _batch_ids(log: RunPath) -> list[int]:
    """The batch ids of one of the checkpoint's logs: a file per batch, named by its id."""
    return sorted(int(p.name) for p in log.iterdir() if p.name.isdigit()) if log.exists() else []


def logged_files(checkpoint: RunPath, source_index: int) -> dict[int, set[str]]:
    """File-log entry -> names of the files found in it.

    Spark's `<c>.compact` holds the entries of every batch up to c, so the newest one and the
    plain files after it say everything; the older files (kept by Spark for ten minutes) are not
    read again, or the work per micro-batch would grow with the square of the run's length."""
    folder = checkpoint / "sources" / str(source_index)
    taken: dict[int, set[str]] = {}
    for log in current_log_files(folder):
        for line in log.read_text().splitlines()[1:]:
            if line.startswith("{"):
                entry = json.loads(line)
                taken.setdefault(entry["batchId"], set()).add(_file_name(entry["path"]))
    return taken


def current_log_files(folder: RunPath) -> list[RunPath]:
    """The newest compact file (if any) and the plain log files after it."""
    if not folder.exists():
        return []
    plain: dict[int, RunPath] = {}
    compact: dict[int, RunPath] = {}
    for log in folder.iterdir():
        batch, _, suffix = log.name.partition(".")
        if batch.isdigit() and suffix in ("", "compact"):
            (compact if suffix else plain)[int(batch)] = log
    since = max(compact, default=-1)
    return ([compact[since]] if compact else []) + [plain[b] for b in sorted(plain) if b > since]


def read_up_to(checkpoint: RunPath, source_index: int, batch_id: int) -> int:
    """The file-log entry of source `source_index` that micro-batch `batch_id` read up to, from
    the offset log (its lines after the version and the batch's metadata are the sources' offsets,
    in source order; "-" for a source that has none yet). -1 before the first micro-batch."""
    if batch_id < 0:
        return -1
    entry = checkpoint / "offsets" / str(batch_id)
    lines = entry.read_text().splitlines() if entry.exists() else []
    if len(lines) < 3 + source_index:
        raise RunStateError(
            f"Spark's offset log has no offset of source {source_index} for micro-batch {batch_id}", where=str(entry)
        )
    offset = lines[2 + source_index]
    return -1 if offset == "-" else int(json.loads(offset)["logOffset"])


def batch_segments(taken: dict[int, set[str]], after: int, up_to: int, staged: StagedChangelog) -> list[dict]:
    """The staged segments (manifest entries) of the file-log entries after `after` up to `up_to`:
    what a micro-batch read, given the previous one's offset and its own."""
    names = {n for entry, files in taken.items() if after < entry <= up_to for n in files}
    return sorted((staged.segment_named(name) for name in names), key=lambda s: s["first_seq"])


def consumed_rows(taken: dict[int, set[str]], up_to: int, staged: StagedChangelog) -> int:
    """Rows of the source in the file-log entries up to `up_to` (a micro-batch's offset); they
    must be a prefix of the changelog, or the stream read segments out of order."""
    names = {n for entry, files in taken.items() if entry <= up_to for n in files}
    segments = [staged.segment_named(n) for n in names]
    end = max((s["first_seq"] + s["rows"] for s in segments), default=0)
    if sum(s["rows"] for s in segments) != end:
        raise RunStateError(
            "the stream read changelog segments out of order; start a new run folder", where=str(staged.directory)
        )
    return end


def consumed_by(checkpoint: RunPath, source_index: int, batch_id: int, staged: StagedChangelog) -> int:
    """Rows of the source that the micro-batches up to `batch_id` consumed."""
    return consumed_rows(logged_files(checkpoint, source_index), read_up_to(checkpoint, source_index, batch_id), staged)


def largest_unread_segment(checkpoint: RunPath, source_index: int, staged: StagedChangelog) -> int:
    """Rows of the largest staged segment past what the committed micro-batches consumed: at most
    what one micro-batch of the coming run reads from this source. Segments already consumed do
    not count, or one large first run would size every later small increment as large work."""
    done = committed_batches(checkpoint)
    consumed = consumed_by(checkpoint, source_index, done[-1], staged) if done else 0
    return max((s["rows"] for s in staged.segments() if s["first_seq"] >= consumed), default=0)


def _file_name(path: str) -> str:
    return PurePosixPath(unquote(urlparse(path).path)).name
