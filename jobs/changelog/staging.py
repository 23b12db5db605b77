"""Stage a source folder's new changelog files: parse, validate, number, and store them.

The staged changelog is what both jobs read: the stream replays it in micro-batches, the batch job
reads it up to the consistency point. Each row gets `__seq`, its position in the whole changelog
(files in name order, rows in file order), so "what the stream consumed" is a single number.

Layout under the run's state folder, per source:
    manifest.json                     what has been staged; rewritten atomically last (the commit point)
    segments/seg-<first seq>.parquet  one micro-batch of rows each (see segments.py)
    pending/                          a staging run not committed yet: its segments, its bad rows,
                                      and generation.json, the manifest its commit writes
    live-<generation>.parquet         the live rows after that run (see live.py); past a million
                                      rows a folder of parts split by key (live_parts.py)
    live-pending/                     parts a staging run rewrote, until it prepares its generation

The staged rows are cut into segments (the spec's `stream.rows_per_batch` rows, or when that is
unset about `stream.megabytes_per_batch` of rows), and each segment is one micro-batch: Spark's
own Parquet stream source reads them one file per trigger. Files are parsed a block at a time, and
the rows are checked and handed to their segments a few blocks (CHECK_ROWS rows) at a time, so a
file of millions of rows is never in memory whole; the next block is parsed meanwhile (read_ahead.py).

Staging prepares its run on disk (the next generation's live rows under a name the manifest does
not list yet, the rest in pending/) and a commit makes it current: a few renames, the bad rows
appended, the manifest. The commit needs nothing the staging process held, so a source can be
staged in one process and committed from another (jobs/stream/staging_tasks.py: Spark tasks).

A file already staged must not change: appending to a changelog means adding files.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from jobs.changelog import kafka_source, partitions
from jobs.changelog.columns import FILE, KIND, LINE, SEQ, WATERMARK
from jobs.changelog.delta_source import new_versions, row_text
from jobs.changelog.formats import BadRow, ParsedFile, joined, parse_blocks
from jobs.changelog.live import LiveRows
from jobs.changelog.quarantine import append_quarantine, quarantine_table
from jobs.changelog.read_ahead import read_ahead
from jobs.changelog.schema import SourceSchema, parse_schema
from jobs.changelog.segments import (
    PENDING,
    SEGMENTS,
    SegmentWriter,
    Watermark,
    clear_uncommitted,
    move_to_segments,
)
from jobs.errors import InputError, RunStateError, place
from jobs.runtime.layout import RunLayout
from jobs.spec.model import SourceSpec, StreamSpec

HIDDEN_PREFIXES = (".", "_")
LIVE_PENDING = "live-pending"
GENERATION = "generation.json"  # in pending/: what a prepared run's commit writes as its manifest
QUARANTINED, ANOMALIES = "quarantined.parquet", "anomalies.parquet"  # in pending/: its bad rows
# Rows validated at a time. The protocol check passes over the whole live state once per call, so
# it takes a few parse blocks together rather than each alone (on the race's 6 M-row file, 11
# calls cost 2.7 s more than one); a parse block's rows are a small part of its JSON's bytes.
CHECK_ROWS = 2_000_000


@dataclass(frozen=True)
class Quarantined:
    source: str
    file: str
    line: int
    reason: str
    raw: str


@dataclass
class StageResult:
    source: str
    new_files: list[str] = field(default_factory=list)
    new_rows: int = 0
    total_rows: int = 0
    quarantined: list[Quarantined] = field(default_factory=list)
    anomalies: list[Quarantined] = field(default_factory=list)  # kept by `on_bad_rows: keep`
    absent_fields: int = 0  # rows staged with a nullable field missing from their JSON (as NULL)
    tombstones: int = 0  # Kafka messages without a value, skipped
    quarantined_rows: int = 0  # len(quarantined), also once the rows are left out (counted())
    anomaly_rows: int = 0

    def counted(self) -> StageResult:
        """The result without its bad rows, only their counts (they are in the prepared run)."""
        return dataclasses.replace(self, quarantined=[], anomalies=[])


class StagedChangelog:
    """Read access to one source's staged rows."""

    def __init__(self, directory: Path, spark_directory=None):
        self.directory = directory
        # Where Spark's executors read the segments (jobs/runtime/layout.py's for_spark): the
        # same folder, or its place on an object store.
        self.spark_directory = spark_directory if spark_directory is not None else directory
        manifest = _read_manifest(directory)
        if manifest is None:
            raise RunStateError("no staged changelog here; run `lockstep stream` first", where=str(directory))
        self.manifest = manifest

    @property
    def schema(self) -> SourceSchema:
        return parse_schema(self.manifest["schema"], where=str(self.directory / "manifest.json"))

    @property
    def total_rows(self) -> int:
        return self.manifest["rows"]

    def segments(self) -> list[dict]:
        return self.manifest["segments"]

    @property
    def segment_dir(self) -> Path:
        return self.directory / SEGMENTS

    @property
    def spark_segment_dir(self):
        return self.spark_directory / SEGMENTS

    @property
    def event_time(self) -> str | None:
        return self.manifest.get("event_time")

    @property
    def absent_fields(self) -> int:
        """Rows staged with a nullable field their JSON left out (as NULL)."""
        return self.manifest.get("absent_fields", 0)

    @property
    def tombstones(self) -> int:
        """Kafka messages without a value (after a delete), skipped."""
        return self.manifest.get("tombstones", 0)

    @property
    def watermark_floor(self) -> int | None:
        """Where the end of a bounded input left the watermark (microseconds), if it did."""
        return self.manifest.get("watermark_floor")

    def live_rows_at(self, consumed: int) -> Path | None:
        """Where Spark reads the live rows staging left (live.py), when they are the source as of
        `consumed` changelog rows: every staged row consumed, and every one of them obeying the
        protocol, so that they are exactly the multiset the changelog's weights leave. None
        otherwise (a point inside the staged rows, rows kept although they break the protocol,
        a manifest from before they were counted, a run folder on an object store, where only
        the segments are at their own keys for Spark: jobs/store/mirror.py)."""
        live = self.manifest["live_state"]
        if live is None or consumed != self.total_rows or self.manifest.get("protocol_breaks") != 0:
            return None
        return self.directory / live if self.spark_directory == self.directory else None

    def segment_ddl(self) -> str:
        """The Spark schema of a segment file."""
        ddl = f"{self.schema.spark_ddl()}, `{KIND}` TINYINT, `{LINE}` INT, `{SEQ}` BIGINT, `{FILE}` STRING"
        if self.event_time:
            time_column = self.schema.column(self.event_time)
            assert time_column is not None, "planning refuses an event_time that is not in the schema"
            ddl += f", `{WATERMARK}` {time_column.spark_type}"
        return ddl

    def segment_named(self, name: str) -> dict:
        return self._segments_by_name[name]

    @functools.cached_property
    def _segments_by_name(self) -> dict[str, dict]:
        # Looked up for every file of every micro-batch so far: a scan each time would be quadratic.
        return {Path(seg["file"]).name: seg for seg in self.segments()}

    def read(self, start: int, end: int, columns: list[str] | None = None) -> pa.Table:
        """Rows with start <= __seq < end, in order."""
        pieces = []
        for seg in self.segments():
            lo, hi = seg["first_seq"], seg["first_seq"] + seg["rows"]
            if hi <= start or lo >= end:
                continue
            table = pq.read_table(self.directory / seg["file"], columns=columns)
            pieces.append(table.slice(max(start - lo, 0), min(end, hi) - max(start, lo)))
        if not pieces:
            return _select(self.empty(), columns)
        return pa.concat_tables(pieces)

    def empty(self) -> pa.Table:
        fields = list(self.schema.arrow()) + [
            pa.field(KIND, pa.int8()),
            pa.field(LINE, pa.int32()),
            pa.field(SEQ, pa.int64()),
            pa.field(FILE, pa.string()),
        ]
        return pa.schema(fields).empty_table()


def staged_changelog(layout: RunLayout, table: str) -> StagedChangelog:
    """A source's staged changelog in a run folder, with where Spark reads its segments."""
    return StagedChangelog(layout.staged(table), layout.for_spark(layout.staged(table)))


def watermark_at(staged: StagedChangelog, rows: int) -> int | None:
    """The watermark after the last consumed segment (microseconds), for sources with event time."""
    if not staged.event_time:
        return None
    done = [s for s in staged.segments() if s["first_seq"] + s["rows"] <= rows]
    marks = [
        m
        for m in (
            done[-1].get("watermark_after") if done else None,
            staged.watermark_floor if rows == staged.total_rows else None,
        )
        if m is not None
    ]
    return max(marks) if marks else None


def consumed_at(staged: StagedChangelog, point, table: str) -> int:
    """The rows of a staged changelog the stream consumed at a consistency point: a source's
    as the point records them; an earlier stage's feed, which its stage reads to the end, whole."""
    return point.rows_consumed(table) if table in point.sources else staged.total_rows


@dataclass(frozen=True)
class _Piece:
    """What one run stages at a time: a new file of a folder source, a new version of a Delta
    table (delta_source.py), or a Kafka partition's new offsets (kafka_source.py)."""

    name: str  # the file's path in the folder, or v<version>
    where: str  # how a message names it
    blocks: Iterable[ParsedFile]  # its rows a block at a time, parsed as they are asked for
    entry: Callable[[], dict]  # once its blocks are read, what the manifest keeps to recognise it:
    # a file's size, mtime and hash (of the bytes parsed); a version
    raw_text: Callable[[set[int]], dict[int, str]]  # the text of some of its rows, by line
    place: Callable[[int], str] | None = None  # where a line is, when not `where` and the line

    def place_of(self, line: int) -> str:
        return self.place(line) if self.place is not None else place(self.where, line)

    def file_of(self, line: int) -> str:
        """What the quarantine's file column says of a line: the file, or where a message is."""
        return self.place(line) if self.place is not None else self.name


def stage_source(
    name: str,
    spec: SourceSpec,
    directory: Path,
    quarantine: Path,
    *,
    batch_size: StreamSpec,
    anomalies: Path | None = None,
    until: date | None = None,
    spark: SparkSession | None = None,
    kafka_timeout: float = 10,
) -> tuple[StageResult, Callable[[], None]]:
    """Parse and validate the source's new files (of the partitions up to `until`, for a
    partitioned source) or, for a Delta source, its new versions (read with `spark`), and prepare
    them as the next generation; return the result and the function that commits it.

    Nothing the stream reads changes until the commit, so a bad row in fail mode leaves the run
    folder as it was. The commit needs nothing this process holds (commit_staged): a source can
    be staged in one process and committed from another (jobs/stream/staging_tasks.py).
    """
    schema = parse_schema(spec.schema_ddl, where=f"source {name}: schema")
    directory.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(directory) or _new_manifest(name, spec)
    _check_same_source(manifest, name, spec, directory)
    clear_uncommitted(directory, manifest)
    _clear_unlisted_live(directory, manifest)
    partitions = None  # a topic's: its watermark is per partition
    if spec.format == "delta":
        pieces = _version_pieces(spark, name, spec, schema, manifest)
    elif spec.kafka is not None:
        partitions, pieces = _topic_pieces(spark, name, spec, schema, manifest, until, kafka_timeout)
    else:
        pieces = _file_pieces(name, spec, schema, manifest, until)
    live = LiveRows(schema, spec.primary_key, spill=directory / LIVE_PENDING)
    live.clear_spill()
    if manifest["live_state"]:
        live.load(directory / manifest["live_state"])
    result = StageResult(source=name, total_rows=manifest["rows"])
    writer = SegmentWriter(directory, len(manifest["segments"]), batch_size, Watermark.of(manifest, partitions))
    try:
        entries = [_stage_piece(piece, spec, live, writer, result) for piece in pieces]
        if entries:
            _prepare_generation(directory, manifest, writer.close(), entries, live, result)
    except BaseException:
        writer.discard()
        live.clear_spill()
        raise
    return result, functools.partial(commit_staged, directory, quarantine, anomalies)


def _stage_piece(piece: _Piece, spec: SourceSpec, live: LiveRows, writer: SegmentWriter, result: StageResult) -> dict:
    """Validate and number a file's (or version's) rows block by block and hand them to the
    segment writer; what the manifest keeps of the piece."""
    first_seq, bad_rows = result.total_rows, 0
    for parsed in _check_batches(read_ahead(piece.blocks)):
        rows, bad, kept = _validated_rows(parsed, piece, spec, live)
        if bad and spec.on_bad_rows == "fail":
            raise InputError(bad[0].reason, where=piece.place_of(bad[0].line))
        result.quarantined += [Quarantined(result.source, piece.file_of(b.line), b.line, b.reason, b.raw) for b in bad]
        result.anomalies += [Quarantined(result.source, piece.file_of(b.line), b.line, b.reason, b.raw) for b in kept]
        result.quarantined_rows, result.anomaly_rows = len(result.quarantined), len(result.anomalies)
        start = result.total_rows
        rows = rows.append_column(SEQ, pa.array(np.arange(start, start + rows.num_rows, dtype=np.int64)))
        rows = rows.append_column(FILE, pa.repeat(pa.scalar(piece.name, pa.string()), rows.num_rows))
        writer.add(rows)
        bad_rows += len(bad)
        result.new_rows += rows.num_rows
        result.total_rows += rows.num_rows
        result.absent_fields += parsed.absent
    result.new_files.append(piece.name)
    entry = piece.entry()
    result.tombstones += entry.get("tombstones", 0)
    return {
        "name": piece.name,
        **entry,
        "first_seq": first_seq,
        "rows": result.total_rows - first_seq,
        "bad_rows": bad_rows,
    }


def _check_batches(blocks: Iterable[ParsedFile]) -> Iterator[ParsedFile]:
    """The blocks joined into runs of at least CHECK_ROWS rows (the last may be shorter)."""
    held: list[ParsedFile] = []
    for block in blocks:
        held.append(block)
        if sum(b.rows.num_rows for b in held) >= CHECK_ROWS:
            yield joined(held)
            held = []
    if held:
        yield joined(held)


def _file_pieces(
    name: str, spec: SourceSpec, schema: SourceSchema, manifest: dict, until: date | None
) -> Iterator[_Piece]:
    """The folder's new files, in name order, after checking that the consumed ones are as they
    were and that no new one sorts before them. Parsed one at a time, as they are staged."""
    folder = spec.folder
    files = _list_files(folder, name)
    _check_consumed_unchanged(manifest, files, folder)
    consumed = {f["name"] for f in manifest["files"]}
    if spec.partitioned_by:
        files = partitions.up_to(files, folder, until)
        partitions.check_in_order([p for p in files if _relative(p, folder) not in consumed], sorted(consumed), folder)
    else:
        _check_appended_in_order([p for p in files if _relative(p, folder) not in consumed], consumed, folder)
    for path in (p for p in files if _relative(p, folder) not in consumed):
        digest = _ReadDigest(path.stat().st_mtime_ns)
        yield _Piece(
            _relative(path, folder),
            _display(path),
            parse_blocks(path, spec.format, schema, seen=digest.update),
            digest.entry,
            functools.partial(_lines_of, path),
        )


class _ReadDigest:
    """A file's size and hash taken from the bytes staging parsed, as it parses them (reading a
    6 M-row file once more only to hash it took 2 s). A file that grew while it was read is then
    recorded as it was read, and a later run finds it changed."""

    def __init__(self, mtime_ns: int):
        self.mtime_ns, self.size, self.hash = mtime_ns, 0, hashlib.sha256()

    def update(self, data: bytes) -> None:
        self.size += len(data)
        self.hash.update(data)

    def entry(self) -> dict:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.hash.hexdigest()}


def _version_pieces(
    spark: SparkSession | None, name: str, spec: SourceSpec, schema: SourceSchema, manifest: dict
) -> Iterator[_Piece]:
    assert spark is not None, "a Delta source is read through Spark: whoever stages one passes the session"
    staged = [f["version"] for f in manifest["files"]]
    for piece in new_versions(spark, name, spec, schema, staged):
        yield _Piece(
            piece.name,
            f"{spec.path}@{piece.name}",
            (piece.parsed,),
            functools.partial(dict, version=piece.version),
            functools.partial(row_text, piece.parsed),
        )


def _topic_pieces(
    spark: SparkSession | None,
    name: str,
    spec: SourceSpec,
    schema: SourceSchema,
    manifest: dict,
    until: date | None,
    timeout: float,
) -> tuple[tuple[int, ...], Iterator[_Piece]]:
    """The topic's partitions, and its new offset ranges' pieces (read as they are asked for)."""
    assert spark is not None, "a Kafka source is read through Spark: whoever stages one passes the session"
    with kafka_source.topic_of(name, spec, timeout) as topic:
        partitions = tuple(topic.partitions())
        ranges = kafka_source.new_ranges(topic, list(partitions), spec, manifest, until)
    pieces = (
        _Piece(piece.name, piece.name, (piece.parsed,), piece.entry, piece.raw_text, piece.place)
        for piece in kafka_source.read_pieces(spark, spec, schema, ranges)
    )
    return partitions, pieces


def _lines_of(path: Path, wanted: set[int]) -> dict[int, str]:
    """Some lines' text, read line by line (the file may be larger than memory)."""
    found, last = {}, max(wanted, default=0)
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if number > last:
                break
            if number in wanted:
                found[number] = line.removesuffix(b"\n").decode("utf-8", errors="replace")
    return found


def _validated_rows(
    parsed: ParsedFile, piece: _Piece, spec: SourceSpec, live: LiveRows
) -> tuple[pa.Table, list[BadRow], list[BadRow]]:
    """(rows to stage, bad rows set aside, rows kept although they break the changelog protocol)."""
    bad = list(parsed.bad)
    if bad and spec.on_bad_rows == "fail":
        return parsed.rows, bad, []
    rows = parsed.rows
    if spec.event_time is not None:
        rows, no_time = _without_event_time(rows, spec.event_time)
        bad += no_time
        if no_time and spec.on_bad_rows == "fail":
            return rows, _fill_raw(sorted(bad, key=lambda b: b.line), piece), []
    keep = spec.on_bad_rows == "keep"
    invalid = live.check(rows, keep=keep)
    if not invalid:
        return rows, _fill_raw(sorted(bad, key=lambda b: b.line), piece), []
    lines = rows.column(LINE).to_pylist()
    protocol = [BadRow(lines[i], reason, "") for i, reason in invalid]
    if keep:
        return rows, _fill_raw(sorted(bad, key=lambda b: b.line), piece), _fill_raw(protocol, piece)
    wanted = pc.invert(pc.is_in(pa.array(range(rows.num_rows)), value_set=pa.array([i for i, _ in invalid])))
    return rows.filter(wanted), _fill_raw(sorted(bad + protocol, key=lambda b: b.line), piece), []


def _without_event_time(rows: pa.Table, column: str) -> tuple[pa.Table, list[BadRow]]:
    """A row without its event time belongs to no window: it is a bad row, not a silent drop."""
    missing = pc.is_null(rows.column(column))
    lines = rows.filter(missing).column(LINE).to_pylist()
    bad = [BadRow(line, f"event_time column '{column}' is null", "") for line in lines]
    return (rows.filter(pc.invert(missing)) if lines else rows), bad


def _fill_raw(bad: list[BadRow], piece: _Piece) -> list[BadRow]:
    wanted = {b.line for b in bad if not b.raw}
    if not wanted:
        return bad
    text = piece.raw_text(wanted)
    return [b if b.raw else BadRow(b.line, b.reason, text.get(b.line, "")) for b in bad]


def _prepare_generation(
    directory: Path,
    manifest: dict,
    segments: list[dict],
    file_entries: list[dict],
    live: LiveRows,
    result: StageResult,
) -> None:
    """Everything the commit makes current, written beside the committed state: the live rows as
    the next generation (a name the manifest does not list yet), and in pending/ the bad rows and
    the next manifest (GENERATION), with the segments already there."""
    generation = manifest["generation"] + 1
    pending = directory / PENDING
    pending.mkdir(parents=True, exist_ok=True)
    pq.write_table(quarantine_table(result.quarantined), pending / QUARANTINED)
    pq.write_table(quarantine_table(result.anomalies), pending / ANOMALIES)
    live_file = live.save(directory / f"live-{generation:06d}").name
    live.clear_spill()
    following = dict(manifest)
    if segments and manifest["event_time"]:
        following["max_event_time"] = segments[-1]["max_event_time"]
        if "max_by_partition" in segments[-1]:
            following["max_event_time_by_partition"] = segments[-1]["max_by_partition"]
    following.update(
        generation=generation,
        rows=result.total_rows,
        live_state=live_file,
        files=manifest["files"] + file_entries,
        segments=manifest["segments"] + segments,
        quarantined=manifest["quarantined"] + len(result.quarantined),
        absent_fields=manifest.get("absent_fields", 0) + result.absent_fields,
        tombstones=manifest.get("tombstones", 0) + result.tombstones,
        protocol_breaks=_protocol_breaks(manifest, len(result.anomalies)),
    )
    previous = manifest["live_state"]
    prepared = {"source": result.source, "manifest": following, "segments": segments, "previous_live": previous}
    _write_json_atomically(pending / GENERATION, prepared)


def _protocol_breaks(manifest: dict, kept: int) -> int | None:
    """Staged rows that break the changelog protocol (kept by `on_bad_rows: keep`), over every
    generation; None once a generation staged before the manifest counted them."""
    before = manifest.get("protocol_breaks", 0 if manifest["generation"] == 0 else None)
    return None if before is None else before + kept


def commit_staged(directory: Path, quarantine: Path, anomalies: Path | None) -> None:
    """Make the prepared staging run in `directory` the committed one (nothing, if it staged
    nothing new): its bad rows appended to the quarantine and anomalies tables (idempotent per
    generation), its segments moved where the stream reads them, then the manifest, the commit
    point. A crash before the manifest leaves the last generation committed; the next staging
    run clears what this one left."""
    prepared_file = directory / PENDING / GENERATION
    if not prepared_file.exists():
        return
    prepared = json.loads(prepared_file.read_text())
    manifest, source = prepared["manifest"], prepared["source"]
    generation = manifest["generation"]
    bad = pq.read_table(directory / PENDING / QUARANTINED)
    append_quarantine(quarantine, bad, app_id=f"lockstep-staging-{source}", version=generation)
    if anomalies is not None:
        kept = pq.read_table(directory / PENDING / ANOMALIES)
        append_quarantine(anomalies, kept, app_id=f"lockstep-anomalies-{source}", version=generation)
    move_to_segments(directory, prepared["segments"])
    _write_json_atomically(directory / "manifest.json", manifest)
    shutil.rmtree(directory / PENDING, ignore_errors=True)
    previous = prepared["previous_live"]
    if previous and previous != manifest["live_state"]:
        _remove(directory / previous)


def _clear_unlisted_live(directory: Path, manifest: dict) -> None:
    """Live state a run prepared but never committed (the manifest names the committed one)."""
    for path in directory.glob("live-*"):
        if path.name not in (manifest["live_state"], LIVE_PENDING):
            _remove(path)


def _remove(path: Path) -> None:
    """A file or a folder (a state split into parts)."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def raise_watermark_floor(directory: Path, micros: int) -> None:
    """At the end of a bounded input every window up to `micros` closed: rows staged from now on
    carry at least this watermark, so a later change to a closed window is late."""
    manifest = StagedChangelog(directory).manifest
    manifest["watermark_floor"] = max(micros, manifest.get("watermark_floor") or micros)
    _write_json_atomically(directory / "manifest.json", manifest)


def _new_manifest(name: str, spec: SourceSpec) -> dict:
    return {
        "source": name,
        **_identity(spec),
        "generation": 0,
        "rows": 0,
        "quarantined": 0,
        "files": [],
        "segments": [],
        "live_state": None,
        "max_event_time": None,
    }


def _identity(spec: SourceSpec) -> dict:
    """What a run folder's staged changelog was made with; changing any of it needs a new run."""
    identity: dict[str, Any] = {
        "format": spec.format,
        "schema": spec.schema_ddl,
        "primary_key": list(spec.primary_key),
        "event_time": spec.event_time,
        "watermark": spec.watermark,
        "partitioned_by": spec.partitioned_by,
    }
    if spec.format == "delta":
        start = spec.starting_timestamp.isoformat() if spec.starting_timestamp else spec.starting_version
        identity["starting_point"] = start
    if spec.kafka is not None:
        identity["topic"] = spec.kafka.topic
        offsets = spec.kafka.starting_offsets
        given = offsets if isinstance(offsets, str) else {str(p): o for p, o in sorted(offsets.items())}
        identity["starting_point"] = spec.starting_timestamp.isoformat() if spec.starting_timestamp else given
    return identity


def _read_manifest(directory: Path) -> dict | None:
    path = directory / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def _check_same_source(manifest: dict, name: str, spec: SourceSpec, directory: Path) -> None:
    for key, value in _identity(spec).items():
        if manifest.get(key) != value:
            raise RunStateError(
                f"source {name}: {key} changed since this run folder was started "
                f"({manifest[key]!r} -> {value!r}); use a new --out folder or "
                f"`lockstep rebuild`",
                where=str(directory),
            )


def _list_files(folder: Path, name: str) -> list[Path]:
    if not folder.is_dir():
        raise InputError(f"source {name}: folder does not exist", where=str(folder))
    return sorted(
        (p for p in folder.rglob("*") if p.is_file() and not _hidden(p, folder)), key=lambda p: _relative(p, folder)
    )


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(HIDDEN_PREFIXES) for part in path.relative_to(root).parts)


def _check_consumed_unchanged(manifest: dict, files: list[Path], folder: Path) -> None:
    present = {_relative(p, folder): p for p in files}
    for entry in manifest["files"]:
        path = present.get(entry["name"])
        if path is None:
            raise InputError(
                "file was consumed by an earlier run and has since been removed", where=str(folder / entry["name"])
            )
        if not _same_file(path, entry):
            raise InputError(
                "file changed after an earlier run consumed it; changelog files are "
                "append-only: add a new file instead, or restore this one, or start "
                "over with `lockstep rebuild`",
                where=str(path),
            )


def _same_file(path: Path, entry: dict) -> bool:
    """Whether `path` still holds what was consumed: its size and mtime when both are unchanged;
    else its content, so that touching a file (a copy, a checkout) does not make it new."""
    stat = path.stat()
    if stat.st_size != entry["size"]:
        return False
    if stat.st_mtime_ns == entry["mtime_ns"]:
        return True
    return "sha256" in entry and _digest(path) == entry["sha256"]  # manifests before hashes: changed


def _digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _check_appended_in_order(new: list[Path], consumed: set[str], folder: Path) -> None:
    """A source's changelog is its files in name order: a new file must sort after every file an
    earlier run consumed, or it would be read out of order (and a rebuild would read it elsewhere)."""
    if not consumed:
        return
    last = max(consumed)
    for path in new:
        if _relative(path, folder) < last:
            raise InputError(
                f"new file sorts before {last}, which an earlier run already consumed: files are "
                f"read in name order, so it would come out of order; give it a name that sorts "
                f"after, or `lockstep rebuild` to replay the folder in order",
                where=str(path),
            )


def _relative(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def _display(path: Path) -> str:
    """The path as the user would type it: relative to the working folder when inside it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _write_json_atomically(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _select(table: pa.Table, columns: list[str] | None) -> pa.Table:
    return table.select(columns) if columns else table
