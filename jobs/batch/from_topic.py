"""The batch step's read of a Kafka source: the topic itself, from where the staged changelog
starts to exactly the offsets the consistency point recorded, with Spark's batch Kafka reader.
The messages are parsed on the executors by the parser staging used (jobs/changelog/formats.py)
and folded into the source's live rows, so the batch job does not trust the stream's copy of the
topic.

What the topic still holds may not be what the stream read. The batch computes from the staged
changelog instead, and says why, when:
- retention has deleted offsets the point covers (a partition's first retained offset is past
  where the staged changelog starts);
- compaction has removed messages (fewer messages in the offsets than staging read);
- staging set messages aside (quarantine), or the stream stopped inside an offset range.
It never computes from a partial log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.columns import KIND, LINE
from jobs.changelog.formats import parse_lines
from jobs.changelog.frames import live_rows
from jobs.changelog.kafka_source import as_line, kafka_frame, starting_offsets, topic_of
from jobs.changelog.schema import parse_schema
from jobs.changelog.staging import StagedChangelog
from jobs.errors import InputError
from jobs.point import SourcePosition, offsets_text
from jobs.spec.model import SourceSpec


def topic_snapshot(
    spark: SparkSession,
    name: str,
    spec: SourceSpec,
    staged: StagedChangelog,
    position: SourcePosition | None,
    timeout: float,
) -> tuple[DataFrame | None, str]:
    """The source's live rows as of the point, read from the topic; or None and the reason the
    staged changelog must be used instead."""
    manifest = staged.manifest
    if position is None or position.offsets is None:
        return None, "the stream stopped inside an offset range"
    if manifest["quarantined"]:
        return None, "messages were set aside when they were staged"
    ranges = _ranges(manifest, position.offsets)
    if not ranges:
        return spark.createDataFrame([], staged.schema.spark_ddl()), "the topic (no offsets consumed)"
    with topic_of(name, spec, timeout) as topic:
        for partition, (start, _) in ranges.items():
            low = topic.watermarks(partition).low
            if low > start:
                return None, f"retention deleted partition {partition}'s offsets {start} to {low - 1}"
    assert spec.kafka is not None
    messages = kafka_frame(spark, spec.kafka, ranges).select("partition", "offset", "value").cache()
    gap = _fewer_messages(messages, manifest, position.offsets)
    if gap:
        messages.unpersist()
        return None, gap
    changes = messages.mapInArrow(_parser(spec.format, staged.manifest["schema"]), _changes_ddl(staged))
    ends = {p: end for p, (_, end) in ranges.items()}
    return live_rows(changes, list(staged.schema.names)), f"topic {spec.kafka.topic} up to {offsets_text(ends)}"


def _ranges(manifest: dict, offsets: dict[int, int]) -> dict[int, tuple[int, int]]:
    starts = starting_offsets(manifest)
    return {p: (starts[p], end) for p, end in sorted(offsets.items()) if end > starts.get(p, end)}


def _fewer_messages(messages: DataFrame, manifest: dict, offsets: dict[int, int]) -> str | None:
    """Whether the topic holds fewer messages in the offsets than staging read (compaction)."""
    staged: dict[int, int] = {}
    for entry in manifest["files"]:
        if entry["end"] <= offsets.get(entry["partition"], -1):
            staged[entry["partition"]] = staged.get(entry["partition"], 0) + entry["messages"]
    found = {row["partition"]: row["count"] for row in messages.groupBy("partition").count().collect()}
    for partition, count in sorted(staged.items()):
        if found.get(partition, 0) != count:
            return (
                f"partition {partition} holds {found.get(partition, 0):,} messages in the consumed offsets, "
                f"staging read {count:,} (compaction)"
            )
    return None


def _changes_ddl(staged: StagedChangelog) -> str:
    return f"{staged.schema.spark_ddl()}, `{KIND}` TINYINT"


def _parser(fmt: str, schema_ddl: str):
    """A function of Arrow batches of messages to change rows, for mapInArrow (it pickles)."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = parse_schema(schema_ddl, where="the staged manifest")
        for batch in batches:
            table = pa.Table.from_batches([batch]).sort_by([("partition", "ascending"), ("offset", "ascending")])
            values = table.column("value").to_pylist()
            data = b"\n".join(map(as_line, values))
            parsed = parse_lines(data, fmt, schema)
            if parsed.bad:
                line = parsed.bad[0].line - 1
                where = f"partition {table.column('partition')[line]} offset {table.column('offset')[line]}"
                raise InputError(f"a message staging read does not parse now: {parsed.bad[0].reason}", where=where)
            rows = parsed.rows.drop_columns([LINE])
            yield from rows.cast(pa.schema([*schema.arrow(), pa.field(KIND, pa.int8())])).to_batches()

    return parse
