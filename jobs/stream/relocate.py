"""A run folder that moved (copied elsewhere, mounted at another path on an Airflow worker)
resumes where it stopped.

Everything lockstep writes names its files relative to the run folder, except one thing Spark
writes: the file source's log in each checkpoint (`checkpoint/sources/<n>/<batch>`) records the
absolute URI of every staged segment it read. Seen from a new place, those segments would look
unread. So the run folder records where it was last streamed (`_state/root`), and before a
stream starts in a new place, the logged URIs are rewritten to the new one.

Spark writes those logs through Hadoop's checksummed local file system, which keeps a
`.<name>.crc` beside each file and refuses a file that no longer matches it. A rewritten log's
checksum file is removed first (Hadoop reads a file without one unchecked): a crash between the
two steps leaves the old log without its checksum, which still reads, and is rewritten next time.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs.runtime.layout import RunLayout

ROOT_FILE = "root"  # in _state/: the absolute path the run folder was last streamed at


def follow_moved_run_folder(layout: RunLayout) -> int:
    """Rewrite the checkpoints' source logs if the folder moved; record where it is now.
    Returns how many log files were rewritten."""
    here = layout.root.resolve()
    recorded = layout.state / ROOT_FILE
    before = Path(recorded.read_text().strip()) if recorded.exists() else None
    rewritten = _rewrite_source_logs(here, before, here) if before is not None and before != here else 0
    layout.state.mkdir(parents=True, exist_ok=True)
    _write_atomically(recorded, f"{here}\n")
    return rewritten


def _rewrite_source_logs(root: Path, old: Path, new: Path) -> int:
    old_uri, new_uri = old.as_uri() + "/", new.as_uri() + "/"
    rewritten = 0
    for log in root.glob("**/checkpoint/sources/*/*"):
        if not log.is_file() or log.name.startswith("."):
            continue
        text = log.read_text()
        if old_uri in text:
            _checksum_of(log).unlink(missing_ok=True)
            _write_atomically(log, text.replace(old_uri, new_uri))
            rewritten += 1
    return rewritten


def _checksum_of(path: Path) -> Path:
    """Hadoop's checksum file for `path`."""
    return path.with_name(f".{path.name}.crc")


def _write_atomically(path: Path, text: str) -> None:
    """A crash leaves the old file or the new one, never half of either."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)
