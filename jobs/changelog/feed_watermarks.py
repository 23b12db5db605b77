"""The watermark an earlier stage's rows carry into a later stage's window.

A window over a stage's rows (a window over a deduplication, a window over a window's result)
closes by the source's watermark, as Flink's does: the earlier stage's rows go downstream before
the watermark that follows them. So each version the earlier stage commits is recorded with the
watermark after its micro-batch (`watermarks.jsonl` in the stage's state folder), and when the
version is staged for the next stage its rows carry the watermark in effect before it (`__wm`,
as a source's segment rows do) and its segment the watermark after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

WATERMARKS = "watermarks.jsonl"


@dataclass(frozen=True)
class VersionWatermarks:
    before: int | None  # microseconds since the epoch: in effect while the version's rows were made
    after: int | None  # after the micro-batch that committed the version


def record_watermark(state: Path, version: int, after: int | None) -> None:
    """After a micro-batch of an earlier stage: the table's version and the watermark after it
    (a micro-batch that committed nothing records the version it left, which moves `before` on)."""
    state.mkdir(parents=True, exist_ok=True)
    with open(state / WATERMARKS, "a") as out:
        out.write(json.dumps({"version": version, "after": after}) + "\n")


def version_watermarks(state: Path) -> dict[int, VersionWatermarks]:
    """Each recorded version's watermarks: the first micro-batch that left the version made it."""
    path = state / WATERMARKS
    if not path.exists():
        return {}
    found: dict[int, VersionWatermarks] = {}
    previous = None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        found.setdefault(entry["version"], VersionWatermarks(previous, entry["after"]))
        previous = entry["after"] if entry["after"] is not None else previous
    return found


@dataclass(frozen=True)
class Watermarks:
    """The recorded versions' watermarks, and the stage table's column whose type `__wm` takes."""

    versions: dict[int, VersionWatermarks]
    column: str

    def of(self, version: int, manifest: dict) -> VersionWatermarks:
        """A version's watermarks, never below the floor the end of a bounded input left in the
        staged feed's manifest (a change staged after it to a closed window is late)."""
        recorded = self.versions.get(version) or VersionWatermarks(None, None)
        floor = manifest.get("watermark_floor")
        if floor is None:
            return recorded
        return VersionWatermarks(max(recorded.before or floor, floor), max(recorded.after or floor, floor))
