"""What a stream step leaves for the check to read besides its tables: the log of its
micro-batches, Spark's aggregation state, and the upsert materializer's live rows."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from jobs.changelog.columns import ORDINAL
from jobs.plan import StagePlan
from jobs.runtime.layout import RunLayout
from jobs.stream.aggregate import state_value_names


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


def aggregation_state(spark: SparkSession, stage: StagePlan, layout: RunLayout) -> DataFrame:
    """Spark's aggregation state after the last micro-batch, value fields named as lockstep names
    them (Spark's state store calls every SUM buffer "sum")."""
    spark.streams.active  # starts the state store coordinator the state reader talks to
    state = spark.read.format("statestore").load(str(layout.checkpoint))
    names = state_value_names(stage.aggregate)
    value_type = state.schema["value"].dataType
    renamed = StructType([StructField(n, f.dataType) for n, f in zip(names, value_type.fields)])
    return state.select("key", F.col("value").cast(renamed).alias("value"))


def materializer_rows(spark: SparkSession, layout: RunLayout) -> DataFrame | None:
    """The materializer's live rows after the last micro-batch (its newest state file)."""
    files = sorted(layout.materializer.glob("state-*.parquet")) if layout.materializer.exists() else []
    return spark.read.parquet(str(files[-1])).drop(ORDINAL) if files else None
