"""A versioned table's history, for the batch's point-in-time joins (plan/temporal_join.py): one
row per version, from the staged changelog's rows (jobs/spark_sql.py registers it as a view).

A +I or +U row is a version at its own time; a -D is a deletion at the deleted row's time; a -U is
no version (Flink drops it before the join). Of two changes of a key at one time the later wins.
Each version holds until the next one of its key starts (VALID_TO, NULL for the latest).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.changelog.columns import KIND, LIVE, SEQ, VALID_TO
from jobs.changelog.kinds import RowKind


def history(changes: DataFrame, key_columns: tuple[str, ...], time_column: str, columns: tuple[str, ...]) -> DataFrame:
    """The versions the changelog rows `changes` leave, keyed by `key_columns`, at `time_column`."""
    key = [F.col(f"`{k}`") for k in key_columns]
    time = F.col(f"`{time_column}`")
    versions = changes.where(F.col(KIND) != int(RowKind.UPDATE_BEFORE))
    latest_first = Window.partitionBy(*key, time).orderBy(F.col(SEQ).desc())
    versions = versions.withColumn("__nth", F.row_number().over(latest_first)).where(F.col("__nth") == 1)
    in_time = Window.partitionBy(*key).orderBy(time)
    return versions.select(
        *[F.col(f"`{c}`") for c in columns],
        F.lead(time).over(in_time).alias(VALID_TO),
        (F.col(KIND) != int(RowKind.DELETE)).alias(LIVE),
    )
