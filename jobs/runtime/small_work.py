"""Spark's settings for work on a few rows.

Whole-stage code generation compiles each new plan to Java (Janino) before it runs, and adaptive
execution plans a query stage by stage; on a micro-batch of a few rows both cost more than the
work itself. Below `spark.small_work_rows` input rows, a stage's micro-batches, a batch job or a
check run with both off; the results are the same either way (Spark's interpreted operators
compute what the generated code computes), only the time differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from jobs.runtime.session_conf import settings_for

SMALL_WORK_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"}


@contextmanager
def sized_for(spark: SparkSession, rows: int, threshold: int) -> Iterator[bool]:
    """Run the block with SMALL_WORK_CONF when `rows` is under `threshold` (0: never), and put
    the session's own values back afterwards. Yields whether it applied."""
    if rows >= threshold:
        yield False
        return
    with settings_for(spark, SMALL_WORK_CONF):
        yield True
