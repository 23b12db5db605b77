"""A Kafka source's changelog: the topic's messages, partition by partition in offset order.

Each staging run reads, for every partition, the offsets from where the last run stopped to the
partition's end (its high watermark; for a scheduled run's logical date D, the first offset
stamped after D), with Spark's Kafka reader. One partition's new offsets are one piece of the
staged changelog (as a file is for a folder source), cut into pieces of at most MAX_OFFSETS.
The manifest keeps each piece's partition and offsets, so the offsets the stream consumed are
known per partition (`consumed_offsets`), and a rerun reads only the offsets after them.

A message is a line of the source's format: its value's newlines are blanked (JSON allows
whitespace there), and a tombstone (no value: what Debezium writes after a delete, for log
compaction) is a blank line, skipped and counted. Line n of a piece is its offset start + n - 1,
which is how a bad message is named.

A partition whose first retained offset has moved past the offset the next run must read
(retention deleted messages before lockstep read them) stops the run with an InputError: the
changelog would have a gap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from jobs.changelog.formats import ParsedFile, parse_lines
from jobs.changelog.schema import SourceSchema
from jobs.errors import InputError
from jobs.kafka.topic import Topic, Watermarks
from jobs.spec.model import KafkaSpec, SourceSpec

# Offsets read (and held in the driver) at a time: a piece of a partition's new messages.
MAX_OFFSETS = 1_000_000


@dataclass(frozen=True)
class OffsetRange:
    partition: int
    start: int
    end: int  # exclusive: the offset after the range's last


@dataclass(frozen=True)
class RangePiece:
    topic: str
    range: OffsetRange
    parsed: ParsedFile
    messages: int  # present in the range (a compacted topic may have fewer than its offsets)
    tombstones: int
    values: list[bytes | None]  # by line - 1, for a bad row's raw text

    @property
    def name(self) -> str:
        return piece_name(self.topic, self.range.partition, self.range.start)

    def entry(self) -> dict:
        r = self.range
        return {
            "partition": r.partition,
            "start": r.start,
            "end": r.end,
            "messages": self.messages,
            "tombstones": self.tombstones,
        }

    def place(self, line: int) -> str:
        return offset_place(self.topic, self.range.partition, self.range.start + line - 1)

    def raw_text(self, lines: set[int]) -> dict[int, str]:
        found = {n: self.values[n - 1] for n in lines if 0 < n <= len(self.values)}
        return {n: as_line(v).decode("utf-8", errors="replace") for n, v in found.items()}


def piece_name(topic: str, partition: int, start: int) -> str:
    """What the manifest and each staged row (__file) call a piece: topic/partition@first offset."""
    return f"{topic}/{partition}@{start}"


def partition_of_piece(name: str) -> int:
    return int(name.rsplit("@", 1)[0].rsplit("/", 1)[1])


def offset_place(topic: str, partition: int, offset: int) -> str:
    return f"kafka topic {topic} partition {partition} offset {offset}"


def topic_of(name: str, spec: SourceSpec, timeout: float) -> Topic:
    kafka = _kafka(spec)
    assert kafka.bootstrap_servers, "the pipeline fills in the bootstrap servers (jobs/kafka/servers.py)"
    return Topic(kafka.bootstrap_servers, kafka.topic, timeout, f"source {name}")


def check_topic(name: str, spec: SourceSpec, timeout: float) -> None:
    """The broker answers and has the topic: checked before Spark starts, so that an unreachable
    broker is one line within `timeout`."""
    with topic_of(name, spec, timeout) as topic:
        topic.partitions()


def new_ranges(
    topic: Topic, partitions: list[int], spec: SourceSpec, manifest: dict, until: date | None
) -> list[OffsetRange]:
    """Every partition's offsets after those staged, up to its end (or to `until`'s end); each
    partition's watermarks asked of the broker once."""
    marks = {p: topic.watermarks(p) for p in partitions}
    staged = staged_ends(manifest)
    ends = topic.offsets_at(partitions, end_of(until)) if until else {p: m.high for p, m in marks.items()}
    unstaged = [p for p in partitions if p not in staged]
    firsts = _first_offsets(topic, spec, {p: marks[p] for p in unstaged}) if unstaged else {}
    ranges = []
    for partition in partitions:
        start = staged.get(partition, firsts.get(partition))
        assert start is not None
        if partition in staged:
            _check_retained(topic, partition, start, marks[partition].low)
        for at in range(start, ends[partition], MAX_OFFSETS):
            ranges.append(OffsetRange(partition, at, min(at + MAX_OFFSETS, ends[partition])))
    return ranges


def end_of(day: date) -> datetime:
    """A logical date's end: the first moment of the next day, in UTC."""
    return datetime.combine(day + timedelta(days=1), time(), UTC)


def staged_ends(manifest: dict) -> dict[int, int]:
    """Per partition, the offset after the last one staged."""
    ends: dict[int, int] = {}
    for entry in manifest["files"]:
        ends[entry["partition"]] = max(ends.get(entry["partition"], 0), entry["end"])
    return ends


def _first_offsets(topic: Topic, spec: SourceSpec, partitions: dict[int, Watermarks]) -> dict[int, int]:
    """Where each partition's changelog starts: the spec's offset, the first at its starting
    timestamp, or the first retained."""
    if spec.starting_timestamp is not None:
        moment = spec.starting_timestamp
        return topic.offsets_at(list(partitions), moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    given = _kafka(spec).starting_offsets
    firsts = {}
    for partition, marks in partitions.items():
        wanted = given.get(partition, marks.low) if isinstance(given, dict) else marks.low
        if not marks.low <= wanted <= marks.high:
            raise InputError(
                f"kafka.starting_offsets gives partition {partition} offset {wanted}, outside its retained "
                f"offsets {marks.low} to {marks.high}",
                where=topic.where,
            )
        firsts[partition] = wanted
    return firsts


def _check_retained(topic: Topic, partition: int, next_offset: int, low: int) -> None:
    if low > next_offset:
        raise InputError(
            f"Kafka topic {topic.name} partition {partition}: offsets {next_offset} to {low - 1} were deleted "
            f"(retention) before they were read, so the changelog has a gap; start a new run folder from the "
            f"retained offsets (docs/kafka.md)",
            where=topic.where,
        )


def read_pieces(
    spark: SparkSession, spec: SourceSpec, schema: SourceSchema, ranges: list[OffsetRange]
) -> Iterator[RangePiece]:
    """Each range parsed, in order; ranges of different partitions that together span at most
    MAX_OFFSETS are read by one Spark job."""
    kafka = _kafka(spec)
    for group in _read_together(ranges):
        messages = read_ranges(spark, kafka, group)
        for offsets in group:
            mine = messages.filter(pc.equal(messages.column("partition"), offsets.partition))
            values, tombstones = _by_offset(mine, offsets)
            data = b"\n".join(map(as_line, values))
            yield RangePiece(
                kafka.topic, offsets, parse_lines(data, spec.format, schema), mine.num_rows, tombstones, values
            )


def _read_together(ranges: list[OffsetRange]) -> Iterator[list[OffsetRange]]:
    group: list[OffsetRange] = []
    for offsets in ranges:
        span = sum(r.end - r.start for r in group) + offsets.end - offsets.start
        if group and (span > MAX_OFFSETS or offsets.partition in {r.partition for r in group}):
            yield group
            group = []
        group.append(offsets)
    if group:
        yield group


def read_ranges(spark: SparkSession, kafka: KafkaSpec, ranges: list[OffsetRange]) -> pa.Table:
    """The messages of some partitions' offsets (partition, offset, value), in offset order."""
    frame = kafka_frame(spark, kafka, {r.partition: (r.start, r.end) for r in ranges})
    return (
        frame.select("partition", "offset", "value")
        .toArrow()
        .sort_by([("partition", "ascending"), ("offset", "ascending")])
    )


def kafka_frame(spark: SparkSession, kafka: KafkaSpec, ranges: dict[int, tuple[int, int]]):
    """Spark's batch Kafka reader over exactly these offsets per partition. Data loss is judged
    by the caller (retained offsets, message counts), not by the reader.

    A partition's offsets are split over as many tasks as Spark runs at once (minPartitions), and
    each fetch may bring 64 MiB: a 375,000-message partition read in 1.1 s instead of 1.5 s."""
    topic = kafka.topic
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("assign", json.dumps({topic: sorted(ranges)}))
        .option("startingOffsets", json.dumps({topic: {str(p): s for p, (s, _) in ranges.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): e for p, (_, e) in ranges.items()}}))
        .option("failOnDataLoss", "false")
        .option("minPartitions", str(spark.sparkContext.defaultParallelism))
        .option("kafka.max.partition.fetch.bytes", str(64 * 2**20))
        .option("kafka.fetch.max.bytes", str(128 * 2**20))
        .load()
    )


def _by_offset(messages: pa.Table, offsets: OffsetRange) -> tuple[list[bytes | None], int]:
    """The range's values by offset (None for a tombstone or an offset with no message: compacted
    away, or a transaction marker), and the tombstones among them."""
    values: list[bytes | None] = [None] * (offsets.end - offsets.start)
    present = messages.column("value")
    tombstones = int(pc.sum(pc.is_null(present)).as_py() or 0)
    for offset, value in zip(messages.column("offset").to_pylist(), present.to_pylist()):
        values[offset - offsets.start] = value
    return values, tombstones


def as_line(value: bytes | None) -> bytes:
    """A message as a line of its format: its newlines blanked (JSON allows whitespace there), no
    value a blank line (skipped, as in a file)."""
    return value.replace(b"\n", b" ").replace(b"\r", b" ") if value is not None else b""


def consumed_offsets(manifest: dict, consumed: int) -> dict[int, int] | None:
    """Per partition, the offset after the last one the first `consumed` staged rows came from;
    None when they stop inside a piece (the stream consumed part of one)."""
    ends: dict[int, int] = {}
    for entry in manifest["files"]:
        done = entry["first_seq"] + entry["rows"] <= consumed
        if not done and entry["first_seq"] < consumed:
            return None
        if done:
            ends[entry["partition"]] = max(ends.get(entry["partition"], 0), entry["end"])
    return ends


def starting_offsets(manifest: dict) -> dict[int, int]:
    """Per partition, where the staged changelog starts."""
    starts: dict[int, int] = {}
    for entry in manifest["files"]:
        starts[entry["partition"]] = min(starts.get(entry["partition"], entry["start"]), entry["start"])
    return starts


def _kafka(spec: SourceSpec) -> KafkaSpec:
    assert spec.kafka is not None, "a Kafka source's spec has its kafka section"
    return spec.kafka
