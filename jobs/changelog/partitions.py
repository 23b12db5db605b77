"""Daily partitions of a source folder: path/date=YYYY-MM-DD/<files>.

A run for logical date D stages the files of the partitions up to D (files sort by path, so by
date first). A file that turns up in a partition older than the newest one already staged would
land in the changelog after newer data; it is refused with its path (`lockstep rebuild` replays
everything in order instead).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from jobs.errors import InputError

FOLDER = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


def partition_date(path: Path, folder: Path) -> date:
    """The date of the partition a file lies in."""
    first = path.relative_to(folder).parts[0]
    match = FOLDER.match(first)
    if match is None or path.parent == folder:
        raise InputError(
            "a source with partitioned_by: date keeps its files in date=YYYY-MM-DD folders", where=str(path)
        )
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        raise InputError(f"{first}: not a calendar date", where=str(path)) from None


def up_to(files: list[Path], folder: Path, until: date | None) -> list[Path]:
    """The files of the partitions up to `until` (all of them without one)."""
    dated = [(partition_date(f, folder), f) for f in files]  # every file must be in a partition
    return [f for day, f in dated if until is None or day <= until]


def check_in_order(new: list[Path], consumed: list[str], folder: Path) -> None:
    if not consumed or not new:
        return
    newest = max(partition_date(folder / name, folder) for name in consumed)
    for path in new:
        if partition_date(path, folder) < newest:
            raise InputError(
                f"arrived in a partition older than date={newest}, which an earlier run "
                f"already consumed; `lockstep rebuild` replays every partition in order",
                where=str(path),
            )


def dates_in(folder: Path) -> list[date]:
    """The dates of the partition folders that hold files, in order."""
    found = {
        partition_date(f, folder)
        for f in folder.rglob("*")
        if f.is_file() and not f.relative_to(folder).parts[0].startswith((".", "_"))
    }
    return sorted(found)
