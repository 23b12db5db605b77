"""Multi-stage queries: compare each intermediate stage table with its batch equivalent.

When the final results disagree, the first stage whose table already differs from its batch
equivalent is where to look; when every intermediate stage agrees, the difference arose in the
last stage. Figures only: the verdict is the suites'.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from expectations.report.model import StageFigures
from jobs.changelog.columns import COUNT
from jobs.plan import Plan, StagePlan
from jobs.runtime.layout import RunLayout
from jobs.runtime.tables import WholeTables


def compare_stages(
    spark: SparkSession,
    plan: Plan,
    layout: RunLayout,
    tables: WholeTables,
    versions: dict[str, int] | None = None,
) -> StageFigures | None:
    """versions: each stage table's Delta version at the consistency point (None: the latest);
    tables: how the run's writer reads them."""
    stages = plan.intermediate_stages
    if not stages:
        return None
    found = [
        _compare(spark, stage, layout.for_stage(stage.name), (versions or {}).get(stage.name), tables)
        for stage in stages
    ]
    first = next((s["stage"] for s in found if not s["agrees"]), None)
    return StageFigures(found, first)


def _compare(
    spark: SparkSession, stage: StagePlan, layout: RunLayout, version: int | None, tables: WholeTables
) -> dict:
    stream = _rows(tables.read(spark, layout.stream, version))
    batch = tables.read(spark, layout.batch)
    columns = [F.col(f"`{c}`") for c in batch.columns]
    stream = stream.select(*columns)
    missing = batch.exceptAll(stream).count()
    extra = stream.exceptAll(batch).count()
    return {
        "stage": stage.name,
        "sql": stage.sql,
        "stream_rows": stream.count(),
        "batch_rows": batch.count(),
        "missing_rows": missing,
        "extra_rows": extra,
        "agrees": missing == 0 and extra == 0,
    }


def _rows(table: DataFrame) -> DataFrame:
    """A multiset stage table's rows, each repeated by its copy count."""
    if COUNT not in table.columns:
        return table
    copies = table.withColumn("__copy", F.explode(F.sequence(F.lit(1), F.col(COUNT))))
    return copies.drop("__copy", COUNT)
