"""Where a runs folder or a source is: a local path, or an object store's URL (s3a://bucket/prefix;
s3:// is read the same). jobs/store/ works with the URLs."""

from __future__ import annotations

from pathlib import Path

SCHEMES = ("s3a://", "s3://")


def is_store_url(text: object) -> bool:
    return isinstance(text, str) and text.startswith(SCHEMES)


def location(value: str | Path) -> str | Path:
    """A runs folder or source as given: an object store's URL stays a string (a Path would
    fold its `//`), anything else is a local path."""
    return value if is_store_url(value) else Path(value)


def local_runs_folder(value: str | Path) -> Path:
    """A runs folder whose reports are read from disk (the index of reports): an object store's
    is refused in one line, its reports being objects (report.html under each query's prefix)."""
    if is_store_url(value):
        from jobs.errors import RunStateError

        raise RunStateError(
            "the reports' index is built from a local runs folder; on an object store each query's "
            "report is its report.html and report.json",
            where=str(value),
        )
    return Path(value)
