"""One error root for everything lockstep reports to a user.

Every error carries the place it is about (a file, a line, a SQL construct) so the CLI can print
one line and exit 2. Errors that are not LockstepError are bugs and keep their traceback.
"""

from __future__ import annotations


class LockstepError(Exception):
    """A problem with the user's input: spec, SQL, changelog rows or run folder."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class SpecError(LockstepError):
    """The query spec or settings file is invalid (unknown key, wrong type, bad value)."""


class SqlError(LockstepError):
    """The SQL does not parse, names an unknown column, or uses an unsupported construct."""


class InputError(LockstepError):
    """A changelog row is malformed or breaks the changelog rules (named by file and line)."""


class RunStateError(LockstepError):
    """The run folder is missing a step's output or was written by a different query."""


class LookupFailed(LockstepError):
    """A lookup join's dimension service did not answer a key, retries included (named by the
    lookup, the URL and the key), and the lookup's on_error is fail."""


def place(path: object, line: int | None = None) -> str:
    """`file:line` (or just the file) as used at the start of every message."""
    return f"{path}:{line}" if line is not None else str(path)
