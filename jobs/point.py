"""The consistency point: the contract between the stream step, the batch step and the check.

When the stream stops it records what it had consumed (changelog rows per source, and the
watermark of sources with event time) and the Delta versions it left (the sink's and every
intermediate stage table's). The batch job computes on exactly that input and the check reads the
tables at exactly those versions, so a disagreement is never "the stream was behind".

    _state/consistency.json          the latest point
    _state/points/<logical date>.json  the point of each logical date (scheduled runs, re-checks)

The batch table's commits carry the fingerprint of the point they were computed at, so a check
can tell whether the batch result in place belongs to its point (runs of different dates share
the batch table, and Airflow may interleave one date's check with the next date's batch step).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from jobs.changelog.staging import StagedChangelog, consumed_at, staged_changelog
from jobs.errors import RunStateError
from jobs.plan.nodes import SessionAggregate, WindowAssign
from jobs.plan.plan import Plan
from jobs.runtime.delta import is_delta_table, open_delta
from jobs.runtime.layout import RunLayout

FINGERPRINT_KEY = "lockstep.consistency_point"  # batch table commit metadata


@dataclass(frozen=True)
class SourcePosition:
    """How far the stream had read one source."""

    rows: int  # changelog rows consumed: the batch job reads the rows before this position
    watermark: int | None = None  # microseconds since the epoch, after the last consumed row
    has_event_time: bool = False
    topic: str | None = None  # a Kafka source's topic, and per partition the offset after the
    offsets: dict[int, int] | None = None  # last one consumed (None: the stream stopped inside a piece)

    def to_json(self) -> dict:
        data: dict = {"rows": self.rows, **({"watermark": self.watermark} if self.has_event_time else {})}
        if self.topic is not None:
            data["topic"] = self.topic
            data["offsets"] = {str(p): o for p, o in sorted(self.offsets.items())} if self.offsets is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict) -> SourcePosition:
        offsets = data.get("offsets")
        return cls(
            data["rows"],
            data.get("watermark"),
            "watermark" in data,
            data.get("topic"),
            {int(p): o for p, o in offsets.items()} if offsets is not None else None,
        )


@dataclass(frozen=True)
class ConsistencyPoint:
    query: str
    sink_version: int
    last_batch: int | None  # the last micro-batch of the stage that writes the sink
    sources: dict[str, SourcePosition]
    stage_versions: dict[str, int] = field(default_factory=dict)  # intermediate stage tables, in order
    logical_date: date | None = None
    written_at: str = ""
    open_windows_version: int | None = None  # emit: final: the table of windows still open

    def rows_consumed(self, source: str) -> int:
        position = self.sources.get(source)
        return position.rows if position is not None else 0

    def total_rows(self) -> int:
        """The changelog rows consumed, over every source."""
        return sum(position.rows for position in self.sources.values())

    def watermark(self, source: str) -> int | None:
        return self.sources[source].watermark

    def fingerprint(self) -> str:
        """What identifies the input a batch result was computed on."""
        return json.dumps({name: p.to_json() for name, p in self.sources.items()}, sort_keys=True)

    def to_json(self) -> dict:
        return {
            "query": self.query,
            "sink_version": self.sink_version,
            "last_batch": self.last_batch,
            "sources": {name: p.to_json() for name, p in self.sources.items()},
            "stages": list(self.stage_versions),
            "stage_versions": dict(self.stage_versions),
            "logical_date": self.logical_date.isoformat() if self.logical_date else None,
            "written_at": self.written_at,
            "open_windows_version": self.open_windows_version,
        }

    @classmethod
    def from_json(cls, data: dict) -> ConsistencyPoint:
        logical = data.get("logical_date")
        return cls(
            data["query"],
            data["sink_version"],
            data.get("last_batch"),
            {name: SourcePosition.from_json(p) for name, p in data["sources"].items()},
            dict(data.get("stage_versions") or {}),
            date.fromisoformat(logical) if logical else None,
            data.get("written_at", ""),
            data.get("open_windows_version"),
        )


def offsets_text(offsets: dict | None) -> str:
    """A Kafka source's offsets (partition -> the offset after the last consumed) for a reader."""
    if offsets is None:
        return "inside an offset range"
    return ", ".join(f"partition {p} → {o}" for p, o in sorted(offsets.items(), key=lambda i: int(i[0])))


def write_point(layout: RunLayout, point: ConsistencyPoint) -> ConsistencyPoint:
    """Record the point as the latest, and as its logical date's when it has one."""
    stamped = replace(point, written_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if stamped.logical_date is not None:
        _write_json(layout.point_for(stamped.logical_date.isoformat()), stamped.to_json())
    _write_json(layout.consistency, stamped.to_json())
    return stamped


def read_point(layout: RunLayout, logical_date: date | None = None) -> ConsistencyPoint:
    """The latest consistency point, or the one recorded for a logical date."""
    if logical_date is not None:
        path = layout.point_for(logical_date.isoformat())
        if not path.exists():
            raise RunStateError(
                f"no consistency point for {logical_date}: the stream has not run for that date", where=str(layout.root)
            )
    else:
        path = layout.consistency
        if not path.exists():
            raise RunStateError("no consistency point: run `lockstep stream` first", where=str(layout.root))
    return ConsistencyPoint.from_json(json.loads(path.read_text()))


def latest_logical_date(layout: RunLayout) -> date | None:
    """The latest logical date the stream has run for (None if it never ran for one)."""
    dates = sorted(p.stem for p in layout.points.glob("*.json")) if layout.points.exists() else []
    return date.fromisoformat(dates[-1]) if dates else None


def batch_is_at(layout: RunLayout, point: ConsistencyPoint) -> bool:
    """Whether the batch result in place was computed at this point."""
    if not is_delta_table(layout.batch):
        return False
    # The newest commit a batch step wrote: later commits by hand (an edit, a test's tampering)
    # change the rows, not the point they were computed at.
    history = open_delta(layout.batch).history()
    written = next((found for found in map(_fingerprint_in, history) if found is not None), None)
    return written == point.fingerprint()


def _fingerprint_in(commit: dict) -> str | None:
    """The fingerprint a batch step left in a commit: a key of its own (delta-rs) or inside the
    commit's userMetadata (Delta's Spark connector)."""
    if FINGERPRINT_KEY in commit:
        return commit[FINGERPRINT_KEY]
    try:
        return json.loads(commit.get("userMetadata") or "{}").get(FINGERPRINT_KEY)
    except (ValueError, AttributeError):
        return None


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


@dataclass(frozen=True)
class LateRead:
    """A window that leaves out late changes, the changelog it reads, and how much of it."""

    window: WindowAssign | SessionAggregate
    table: str
    staged: StagedChangelog
    consumed: int


def late_reads(plan: Plan, layout: RunLayout, point: ConsistencyPoint) -> list[LateRead]:
    """Each window that leaves out late changes, with the changelog it reads up to the point."""
    reads = []
    for late in plan.late_windows:
        staged = staged_changelog(layout, late.read.table)
        reads.append(LateRead(late.window, late.read.table, staged, consumed_at(staged, point, late.read.table)))
    return reads
