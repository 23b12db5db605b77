"""One writer per run folder.

A step that writes a run folder (stream, batch, check, run, rebuild) holds an exclusive lock on
`runs/.<query>.lock` beside the folder (beside it, so a rebuild can move the folder away and back
while holding it). The lock is the kernel's (flock): it goes with the process that holds it, so a
lock left by a killed process is free again at once and the next writer simply takes it; the file
only says who holds it, for the message a second writer gets. The lock is local to one machine:
runs folders on shared storage need one writer host per query (docs/limits.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TextIO

from jobs.errors import RunLocked

_HELD: dict[Path, RunLock] = {}


def run_lock(folder: Path) -> RunLock:
    """The lock of a run folder; one object per folder in a process, so that a step calling
    another (run calls stream) takes it once."""
    folder = Path(folder).resolve()
    return _HELD.setdefault(folder, RunLock(folder))


class RunLock:
    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder.with_name(f".{folder.name}.lock")
        self._file: TextIO | None = None
        self._depth = 0

    def __enter__(self) -> RunLock:
        if self._depth == 0:
            self._acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc_info) -> None:
        self._depth -= 1
        if self._depth == 0 and self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(self.path)
            handle.close()
            raise RunLocked(
                f"the run folder is in use by {holder}; wait for it to finish (a lock "
                f"left by a killed process is released with it)",
                where=str(self.folder),
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "command": " ".join(sys.argv)[:200],
                }
            )
        )
        handle.flush()
        self._file = handle


def _holder(path: Path) -> str:
    """Who holds the lock, as its file says; a holder that has just taken it may not have written
    it yet, so an empty file is read again for a moment."""
    info: dict = {}
    for _ in range(20):
        try:
            info = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if info:
            break
        time.sleep(0.05)
    if not info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('started')} ({info.get('command')})"
