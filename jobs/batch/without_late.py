"""The batch result as the stream should have computed it: the user's SQL without the late
events. It explains a stream/batch difference: if the stream equals this, the late events account
for all of the difference.

Lateness is per (row, window), so the rows cannot simply be dropped (a hopping window row can be
late for one window and on time for the next). Instead the source view carries each row once per
on-time window, as the column __lockstep_window, and the SQL is rewritten to group by that column
where it called window(...): Spark still runs the user's query, minus the late pairs.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from jobs.changelog.columns import SEQ, WINDOW_END, WINDOW_START
from jobs.changelog.frames import assign_windows, consumed_changes, live_rows, on_time
from jobs.changelog.staging import StagedChangelog
from jobs.plan import Plan
from jobs.plan.nodes import SessionAggregate
from jobs.plan.sql import WINDOW, parse_select

ON_TIME_WINDOW = "__lockstep_window"


def batch_without_late(
    spark: SparkSession, plan: Plan, staged: StagedChangelog, consumed: int, late_seqs: list[int] | None = None
) -> DataFrame:
    """`late_seqs`: the changes a session operator left out (jobs/stream/operators/session/lateness.py)."""
    source = plan.sources[0]
    if isinstance(plan.window, SessionAggregate):
        # A session's late change is late as a whole (it touched no open session): the source
        # without the changes the operator left out, and the user's SQL as it is.
        changes = consumed_changes(spark, staged, consumed)
        on_time_changes = changes.where(~F.col(SEQ).isin(late_seqs)) if late_seqs else changes
        live_rows(on_time_changes, list(staged.schema.names)).createOrReplaceTempView(source.table)
        return spark.sql(plan.spec.sql)
    _on_time_pairs(spark, plan, staged, consumed).createOrReplaceTempView(source.table)
    return spark.sql(rewritten_sql(plan))


def _on_time_pairs(spark: SparkSession, plan: Plan, staged: StagedChangelog, consumed: int) -> DataFrame:
    assign = plan.window_assign
    assert assign is not None, "a window aggregate reads its windows from a WindowAssign"
    changes = consumed_changes(spark, staged, consumed)
    pairs = assign_windows(changes, assign.window.spark_sql()).where(on_time())
    names = list(staged.schema.names)
    live = live_rows(pairs, names + [WINDOW_START, WINDOW_END])
    window = F.struct(F.col(WINDOW_START).alias("start"), F.col(WINDOW_END).alias("end"))
    return live.select(*[F.col(f"`{n}`") for n in names], window.alias(ON_TIME_WINDOW))


def rewritten_sql(plan: Plan) -> str:
    """The spec's SQL with window(...) replaced by the precomputed on-time window column."""

    def swap(node):
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == WINDOW:
            return exp.column(ON_TIME_WINDOW)
        if isinstance(node, exp.Column) and node.table.lower() == WINDOW:
            return exp.Dot(this=exp.column(ON_TIME_WINDOW), expression=exp.to_identifier(node.name))
        return node

    return parse_select(plan.spec).transform(swap).sql("spark")
