"""What lockstep is doing while it works, on stderr.

On a terminal, lines drawn by rich, a spinner while lockstep waits (the JVM starting) and a bar
while micro-batches run. Not on a terminal, nothing: a log file gets the report, not a replay of
the screen. An Airflow task passes `emit` (its logger) and gets the same lines as plain log
records. `--quiet` silences all of it.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar
from rich.text import Text


class Progress:
    def __init__(
        self, quiet: bool = False, stream=None, emit: Callable[[str], None] | None = None, terminal: bool | None = None
    ):
        """terminal: whether `stream` is a terminal (None: ask it)."""
        self.emit = emit
        stream = stream or sys.stderr
        on_terminal = terminal if terminal is not None else _is_terminal(stream)
        self.quiet = quiet or (emit is None and not on_terminal)
        self._console = Console(file=stream, force_terminal=on_terminal, highlight=False, soft_wrap=True)
        self._started = time.monotonic()
        self._bar: tuple[Bar, TaskID] | None = None  # the bar and its one task, while it shows

    def say(self, message: str) -> None:
        if self.quiet:
            return
        if self.emit is not None:
            self.emit(message)
            return
        elapsed = time.monotonic() - self._started
        self._console.print(Text.assemble((f"[{elapsed:6.1f}s] ", "dim"), message))  # no markup in it

    @contextlib.contextmanager
    def waiting(self, message: str) -> Iterator[None]:
        """A spinner with `message` while the block runs (a plain line without a terminal)."""
        if self.quiet or self.emit is not None:
            self.say(message)
            yield
            return
        with self._console.status(message):
            yield

    def advance(self, done: int, total: int, what: str) -> None:
        """Move the bar to done/total (rows read of a stage); it goes once done reaches total."""
        if self.quiet or self.emit is not None or total <= 0:
            return
        if self._bar is None:
            bar = Bar(
                TextColumn("  {task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.completed:,} of {task.total:,} rows"),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            bar.start()
            self._bar = (bar, bar.add_task(what, total=total))
        bar, task = self._bar
        bar.update(task, completed=done, total=total, description=what)
        if done >= total:
            self.done()

    def done(self) -> None:
        """Take the bar away (the lines above it stay)."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def counts(changelog: dict[str, int]) -> str:
    return " ".join(f"{kind} {changelog.get(kind, 0):,}" for kind in ("+I", "-U", "+U", "-D"))
