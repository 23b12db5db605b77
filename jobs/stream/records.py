"""What a stream step leaves for the check to read besides its tables: the log of its
micro-batches, the aggregation state, and the upsert materializer's live rows."""

from __future__ import annotations

import json
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from jobs.changelog.columns import ORDINAL
from jobs.plan.nodes import GroupAggregate
from jobs.runtime.arrow_frames import frame_of, frame_through_file
from jobs.runtime.layout import RunLayout
from jobs.stream.offsets import committed_batches
from jobs.stream.operators.aggregate.group_sums import groups_now
from jobs.stream.operators.aggregate.streaming import AggregateState, state_value_names


def engine_marker(layout: RunLayout):
    """The file naming the engine a stage's run folder is streamed by (stage.keep_engine)."""
    return layout.state / "engine"


def recorded_engine(layout: RunLayout) -> str | None:
    """The engine that streamed the run folder: the recorded one; a folder streamed before
    engines were recorded was streamed by the local engine; None before its first stream."""
    marker = engine_marker(layout)
    if marker.exists():
        return marker.read_text().strip()
    return "local" if (layout.checkpoint / "offsets").is_dir() else None


def micro_batches(layout: RunLayout, last_batch: int | None) -> list[dict]:
    """The micro-batches up to `last_batch` (a replayed one once, as last run), each with Spark's
    state rows after it."""
    if not layout.batches_log.exists() or last_batch is None:
        return []
    latest = {}
    for line in layout.batches_log.read_text().splitlines():
        entry = json.loads(line)
        if entry["batch"] <= last_batch:
            latest[entry["batch"]] = entry
    sizes_file = layout.state / "state_rows.json"
    sizes = json.loads(sizes_file.read_text()) if sizes_file.exists() else {}
    for batch, entry in latest.items():
        entry["state_rows"] = sizes.get(str(batch))
    return [latest[b] for b in sorted(latest)]


def aggregation_state(spark: SparkSession, aggregate: GroupAggregate, layout: RunLayout) -> DataFrame:
    """The aggregation state after the last micro-batch, as Spark's state reader shows it: a key
    struct (the group, and the value slot) and a value struct (the count and the sums), named as
    lockstep names them; lockstep's own state (operators/aggregate/group_sums.py) or Spark's."""
    if layout.aggregate_state.exists():
        return _own_state(spark, aggregate, layout)
    _ = spark.streams.active  # starts the state store coordinator the state reader talks to
    state = spark.read.format("statestore").load(str(layout.checkpoint))
    fields = cast(StructType, state.schema["value"].dataType).fields  # the reader's value is a struct
    names = _buffer_names(state_value_names(aggregate), [f.name for f in fields])
    renamed = StructType([StructField(n, f.dataType) for n, f in zip(names, fields)])
    return state.select("key", F.col("value").cast(renamed).alias("value"))


def _own_state(spark: SparkSession, aggregate: GroupAggregate, layout: RunLayout) -> DataFrame:
    keys = AggregateState(aggregate, {}).state_key
    done = committed_batches(layout.checkpoint)
    groups = groups_now(layout.aggregate_state, keys, done[-1] + 1 if done else 0)
    values = [n for n in groups.column_names if n not in keys]
    if not values:  # no micro-batch logged a group: the state's shape, no rows
        return spark.createDataFrame([], "key struct<>, value struct<>")
    frame = _as_frame(spark, groups, layout)
    return frame.select(
        F.struct(*[F.col(f"`{k}`") for k in keys]).alias("key"),
        F.struct(*[F.col(f"`{v}`") for v in values]).alias("value"),
    )


def _as_frame(spark: SparkSession, groups: pa.Table, layout: RunLayout) -> DataFrame:
    """The groups as a Spark DataFrame: through a file in the run folder, unless the executors
    cannot see this host's folder."""
    if layout.spark_root is not None:
        return frame_of(spark, groups)
    return frame_through_file(spark, groups, layout.state / "check" / "aggregate_state.parquet")


def _buffer_names(ours: list[str], spark_names: list[str]) -> list[str]:
    """lockstep's names for Spark's buffer fields. A SUM over a DECIMAL keeps a second field,
    isEmpty, after its sum: it is named after that sum."""
    names: list[str] = []
    remaining = iter(ours)
    for spark_name in spark_names:
        names.append(f"{names[-1]}_is_empty" if spark_name == "isEmpty" and names else next(remaining))
    return names


def materializer_rows(spark: SparkSession, layout: RunLayout) -> DataFrame | None:
    """The materializer's live rows after the last micro-batch (its newest state file, or the
    spark engine's table)."""
    if layout.materializer_table.exists():
        return spark.read.format("delta").load(str(layout.materializer_table)).drop(ORDINAL)
    files = sorted(layout.materializer.glob("state-*.parquet")) if layout.materializer.exists() else []
    if not files:
        return None
    if layout.spark_root is not None:  # the executors cannot see this host's working folder
        return frame_of(spark, pq.read_table(files[-1])).drop(ORDINAL)
    return spark.read.parquet(str(files[-1])).drop(ORDINAL)
