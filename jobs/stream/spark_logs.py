"""Spark's checkpoint logs, rewritten in place where lockstep must (relocate.py; unplanned finds
below).

Spark writes those logs through Hadoop's checksummed local file system, which keeps a
`.<name>.crc` beside each file and refuses a file that no longer matches it. A rewritten log's
checksum file is removed first (Hadoop reads a file without one unchecked): a crash between the
two steps leaves the old log without its checksum, which still reads, and is rewritten next time.
"""

from __future__ import annotations

import json

from jobs.store.files import RunPath, replace_whole
from jobs.stream.offsets import current_log_files, planned_batches, read_up_to


def rewrite_log(path: RunPath, text: str) -> None:
    """Replace a log file's text: its checksum goes first (on a store Hadoop's S3A keeps none),
    then the text."""
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    replace_whole(path, text)


def forget_unplanned_finds(checkpoint: RunPath) -> int:
    """Empty the file-source log entries that no micro-batch planned; returns how many log files
    changed.

    The file source logs the segment it finds before the micro-batch's offset is recorded. After a
    kill between the two, Spark's restarted source counts the logged segment as seen and finds the
    next one too: the first micro-batch would read two segments and emit one coarser change where
    an uninterrupted run emits two. Emptied (not deleted: Spark checks that the entries between two
    offsets are all there), the entry hands the segment back, and the next find logs it again alone."""
    planned = planned_batches(checkpoint)
    last = planned[-1] if planned else -1
    changed = 0
    sources: RunPath = checkpoint / "sources"
    folders: list[RunPath] = sorted(sources.glob("[0-9]*"), key=lambda p: p.name)
    for folder in folders:
        up_to = read_up_to(checkpoint, int(folder.name), last)
        for log in current_log_files(folder):
            version, *entries = log.read_text().splitlines()
            kept = [e for e in entries if not (e.startswith("{") and json.loads(e)["batchId"] > up_to)]
            if len(kept) < len(entries):
                rewrite_log(log, "\n".join([version, *kept]))
                changed += 1
    return changed
