"""`lockstep batch`: the user's SQL over the input the stream had consumed, written as a Delta table.

Each source's snapshot is the multiset of rows whose weights sum to a positive count, computed by
Spark from the staged changelog up to the consistency point: for a keyed source that is the last
image of every live key, for a keyless one every live copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date

from deltalake import write_deltalake
from deltalake.transaction import CommitProperties

from jobs.changelog.frames import source_snapshot
from jobs.lookup.tables import lookup_tables
from jobs.changelog.staging import StagedChangelog
from jobs.plan import Plan
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.runtime.spark import spark_session
from jobs.spark_sql import run_sql
from jobs.spec.model import Settings
from jobs.point import FINGERPRINT_KEY, read_point


@dataclass
class BatchResult:
    rows: int
    input_rows: int
    seconds: float


def run_batch(plan: Plan, settings: Settings, layout: RunLayout,
              progress: Progress | None = None, logical_date: date | None = None) -> BatchResult:
    """The batch result at the latest consistency point, or at a logical date's."""
    progress = progress or Progress(quiet=True)
    started = time.monotonic()
    point = read_point(layout, logical_date)
    spark = spark_session(settings.spark)
    consumed = {name: position.rows for name, position in point.sources.items()}
    snapshots = {s.table: source_snapshot(spark, StagedChangelog(layout.staged(s.table)),
                                          consumed.get(s.table, 0)) for s in plan.sources}
    lookups = lookup_tables(spark, plan, snapshots)  # the services, asked now
    for name, table in lookups.items():  # kept for the check: did the stream get other answers?
        table.write.mode("overwrite").parquet(str(layout.lookup_answers(name, "batch")))
    snapshots.update(lookups)
    result = run_sql(spark, plan, snapshots).toArrow()
    metadata = {FINGERPRINT_KEY: point.fingerprint()}
    _write(layout.batch, result, metadata)
    for stage in plan.intermediate_stages:
        # Each intermediate stage's batch equivalent, for the check to find the first stage
        # where stream and batch part (the stage SQL reads the same source views).
        _write(layout.for_stage(stage.name).batch, run_sql(spark, stage, snapshots).toArrow(), metadata)
    seconds = time.monotonic() - started
    input_rows = sum(consumed.values())
    progress.say(f"batch {plan.spec.name}: {result.num_rows:,} result rows from {input_rows:,} "
                 f"changelog rows in {seconds:.1f} s")
    return BatchResult(result.num_rows, input_rows, seconds)


def _write(path, table, metadata: dict) -> None:
    write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite",
                    commit_properties=CommitProperties(custom_metadata=metadata))
