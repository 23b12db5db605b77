"""A process group that dies with the test process, even when that is killed with kill -9 and its
fixtures never run: a small watchdog polls the test process and kills the group once it is gone.
For servers that start their own children (`airflow standalone`), which a parent-death signal on
the first process alone would leave running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def watch(group: int) -> subprocess.Popen:
    """Start the watchdog for `group` (a process group id); it exits once the group is gone."""
    return subprocess.Popen([sys.executable, __file__, str(os.getpid()), str(group)], start_new_session=True)


def _watch(parent: int, group: int) -> None:
    while _alive(os.killpg, group):
        if not _alive(os.kill, parent):
            os.killpg(group, signal.SIGKILL)
            return
        time.sleep(1)


def _alive(send, target: int) -> bool:
    """Whether the process (os.kill) or process group (os.killpg) `target` still exists."""
    try:
        send(target, 0)
        return True
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    _watch(int(sys.argv[1]), int(sys.argv[2]))
