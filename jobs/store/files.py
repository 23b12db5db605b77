"""The few file operations whose local form a store does differently, for code that works on a run
folder wherever it is: a local Path or a StorePath (paths.py). Everything else is pathlib's
interface, which both have."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TypeAlias

from jobs.store.paths import StorePath

RunPath: TypeAlias = Path | StorePath


def replace_whole(path: RunPath, content: str | bytes) -> None:
    """Replace a file so that a crash leaves the old content or the new, never half of either:
    on a local disk a temporary file renamed over it, on a store one PUT."""
    data = content.encode() if isinstance(content, str) else content
    if isinstance(path, StorePath):
        path.write_bytes(data)
        return
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def remove_tree(path: RunPath) -> None:
    """A folder and everything in it; nothing when it is not there."""
    if isinstance(path, StorePath):
        path.remove_tree()
    else:
        shutil.rmtree(path, ignore_errors=True)
