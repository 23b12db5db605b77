"""Progress lines on stderr while work runs; silent when asked (tests, Airflow's own logging)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, quiet: bool = False, stream=None, emit=None):
        """Lines go to `emit` (e.g. an Airflow task's logger) if given, else to `stream`."""
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.emit = emit
        self._started = time.monotonic()

    def say(self, message: str) -> None:
        if self.quiet:
            return
        if self.emit is not None:
            self.emit(message)
            return
        elapsed = time.monotonic() - self._started
        print(f"[{elapsed:6.1f}s] {message}", file=self.stream, flush=True)


def counts(changelog: dict[str, int]) -> str:
    return " ".join(f"{kind} {changelog.get(kind, 0):,}" for kind in ("+I", "-U", "+U", "-D"))
