"""One error root for everything lockstep reports to a user.

Every error carries the place it is about (a file, a line, a SQL construct) so the CLI can print
one line and exit 2. Errors that are not LockstepError are bugs and keep their traceback.
"""

from __future__ import annotations

import json
import re


class LockstepError(Exception):
    """A problem with the user's input: spec, SQL, changelog rows or run folder."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None):
        self.message = message
        self.where = where
        self.excerpt = getattr(where, "excerpt", None)  # lines to print under the message
        super().__init__(f"{where}: {message}" if where else message)

    def __reduce__(self):
        # A Spark task returns its error as a value (jobs/stream/staging_tasks.py): the copy
        # must keep the message and its place, whatever the subclass's own arguments are.
        return (_rebuilt, (type(self), self.message, self.where))


def _rebuilt(kind: type[LockstepError], message: str, where: str | None) -> LockstepError:
    error = kind.__new__(kind)
    LockstepError.__init__(error, message, where=where)
    return error


class SpecError(LockstepError):
    """The query spec or settings file is invalid (unknown key, wrong type, bad value)."""


class SqlError(LockstepError):
    """The SQL does not parse, names an unknown column, or uses an unsupported construct."""


class InputError(LockstepError):
    """A changelog row is malformed or breaks the changelog rules (named by file and line)."""


class RunStateError(LockstepError):
    """The run folder is missing a step's output or was written by a different query."""


class RunLocked(RunStateError):
    """Another process is writing the run folder (named by its pid, host and start time)."""


class StoreError(LockstepError):
    """An object store (s3a://) cannot be reached, refuses the credentials, lacks the bucket, or
    holds a run folder another writer changed (named by the store's endpoint and the URL)."""


class SetupError(LockstepError):
    """A part lockstep needs is missing or does not match (Delta's Spark connector jars):
    `make setup` installs it."""


class LookupFailed(LockstepError):
    """A lookup join's dimension service did not answer a key, retries included (named by the
    lookup, the URL and the key), and the lookup's on_error is fail."""


def one_line(exc: BaseException) -> str:
    """An error as one line: lockstep's own as it reads, anything else by its type and first line."""
    if isinstance(exc, LockstepError):
        return str(exc)
    java = _java_cause(exc)
    if java:
        return java
    text = str(exc).strip()
    worker = _python_worker_cause(text)
    if worker:
        return f"{type(exc).__name__} in a Spark Python worker: {worker}"
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else 'no message'}"


def _python_worker_cause(text: str) -> str | None:
    """The error a Spark Python worker raised: the last line of the traceback Spark quotes (its
    first line only says that a worker failed)."""
    if "Traceback (most recent call last)" not in text:
        return None
    quoted = text.split("Traceback (most recent call last)", 1)[1]
    last = [line.strip() for line in quoted.splitlines() if line.strip() and not line.startswith((" ", "\t"))]
    return last[-1] if last else None


def _java_cause(exc: BaseException) -> str | None:
    """The innermost cause of a Java exception raised through py4j ("An error occurred while
    calling o55.load" names none), as `Class: message`, its first line only."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    try:
        while java.getCause() is not None:
            java = java.getCause()
        text = str(java.toString()).strip()
    except Exception:  # the JVM is gone: py4j cannot ask it
        return None
    return text.splitlines()[0].removeprefix("java.lang.") if text else None


class Place(str):
    """A `file:line[:column]` that may carry an excerpt of the file: the line, and a caret under
    the spot, printed under the error's one line."""

    excerpt: str | None

    def __new__(cls, text: str, excerpt: str | None = None) -> Place:
        made = super().__new__(cls, text)
        made.excerpt = excerpt
        return made


def place(path: object, line: int | None = None) -> str:
    """`file:line` (or just the file) as used at the start of every message."""
    return f"{path}:{line}" if line is not None else str(path)


# -- errors raised in Spark's Python workers ------------------------------------------------------
# A LockstepError raised inside a worker (a lookup that failed for good) reaches the driver as a
# PythonException holding the worker's traceback as text. The worker side sends it as a tagged
# JSON envelope (WorkerFailure); the driver finds the envelope and raises the same error again,
# as one line naming its place instead of a Java stack trace.

_ENVELOPE = re.compile(r"<lockstep-error>(.*?)</lockstep-error>")


class WorkerFailure(Exception):
    """A LockstepError on its way from a Spark Python worker to the driver."""

    def __init__(self, error: LockstepError):
        data = {"type": type(error).__name__, "message": error.message, "where": error.where}
        super().__init__(f"<lockstep-error>{json.dumps(data)}</lockstep-error>")


def from_worker(exc: BaseException) -> LockstepError | None:
    """The LockstepError a worker sent (anywhere in the exception's text), or None."""
    found = _ENVELOPE.search(str(exc))
    if found is None:
        return None
    data = json.loads(found.group(1))
    kind = next((c for c in _error_classes() if c.__name__ == data["type"]), LockstepError)
    return kind(data["message"], where=data["where"])


def _error_classes() -> list[type[LockstepError]]:
    found, todo = [], [LockstepError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found
