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
    fields = state.schema["value"].dataType.fields
    names = _buffer_names(state_value_names(stage.aggregate), [f.name for f in fields])
    renamed = StructType([StructField(n, f.dataType) for n, f in zip(names, fields)])
    return state.select("key", F.col("value").cast(renamed).alias("value"))


def _buffer_names(ours: list[str], spark_names: list[str]) -> list[str]:
    """lockstep's names for Spark's buffer fields. A SUM over a DECIMAL keeps a second field,
    isEmpty, after its sum: it is named after that sum."""
    names, ours = [], iter(ours)
    for spark_name in spark_names:
        names.append(f"{names[-1]}_is_empty" if spark_name == "isEmpty" and names else next(ours))
    return names


def materializer_rows(spark: SparkSession, layout: RunLayout) -> DataFrame | None:
    """The materializer's live rows after the last micro-batch (its newest state file)."""
    files = sorted(layout.materializer.glob("state-*.parquet")) if layout.materializer.exists() else []
    return spark.read.parquet(str(files[-1])).drop(ORDINAL) if files else None
