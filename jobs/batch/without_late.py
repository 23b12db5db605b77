"""The batch result as the stream should have computed it: the user's SQL without the late
events. It explains a stream/batch difference: if the stream equals this, the late events account
for all of the difference.

Lateness is per (row, window), so the rows cannot simply be dropped (a hopping window row can be
late for one window and on time for the next). Instead the source view carries each row once per
on-time window, as the column __lockstep_window, and the SQL is rewritten to group by that column
where it called window(...): Spark still runs the user's query, minus the late pairs.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from jobs.changelog.columns import SEQ, WINDOW_END, WINDOW_START
from jobs.changelog.frames import assign_windows, consumed_changes, live_rows, on_time
from jobs.changelog.staging import StagedChangelog
from jobs.plan import Plan
from jobs.plan.event_time import window_times_written_out
from jobs.plan.nodes import Calc, Node, SessionAggregate, StageInput, Unary, WindowAssign
from jobs.plan.sql import WINDOW, parse_select
from jobs.plan.to_sql import to_sql
from jobs.point import LateRead

ON_TIME_WINDOW = "__lockstep_window"


def batch_without_late(
    spark: SparkSession, plan: Plan, reads: list[LateRead], late_seqs: list[int] | None = None
) -> DataFrame:
    """`reads`: the windows that leave out late changes, each with the changelog it reads (a
    source, or an earlier stage's feed, whose rows then stand in for that stage's table under
    the final stage's own SQL); `late_seqs`: the changes a session operator left out
    (jobs/stream/operators/session/lateness.py)."""
    assert reads, "only a query whose window leaves out late changes has a batch without them"
    first = reads[0]
    if isinstance(first.window, SessionAggregate):
        # A session's late change is late as a whole (it touched no open session): the source
        # without the changes the operator left out, and the user's SQL as it is.
        changes = consumed_changes(spark, first.staged, first.consumed)
        on_time_changes = changes.where(~F.col(SEQ).isin(late_seqs)) if late_seqs else changes
        live_rows(on_time_changes, list(first.staged.schema.names)).createOrReplaceTempView(first.table)
        return spark.sql(plan.spec.sql)
    assigns = tuple(read.window for read in reads if isinstance(read.window, WindowAssign))
    for read, assign in zip(reads, assigns):
        _on_time_pairs(spark, assign, read.staged, read.consumed).createOrReplaceTempView(read.table)
    late = plan.late_windows[0]
    if isinstance(late.read, StageInput):
        body = _carrying_window(late.stage.root.input, assigns[0])
        return spark.sql(rewritten_sql(plan, assigns, to_sql(body)))
    return spark.sql(rewritten_sql(plan, assigns, plan.spec.sql))


def _on_time_pairs(spark: SparkSession, assign: WindowAssign, staged: StagedChangelog, consumed: int) -> DataFrame:
    changes = consumed_changes(spark, staged, consumed)
    pairs = assign_windows(changes, assign.window.spark_sql()).where(on_time())
    names = list(staged.schema.names)
    live = live_rows(pairs, names + [WINDOW_START, WINDOW_END])
    window = F.struct(F.col(WINDOW_START).alias("start"), F.col(WINDOW_END).alias("end"))
    return live.select(*[F.col(f"`{n}`") for n in names], window.alias(ON_TIME_WINDOW))


def _carrying_window(node: Node, assign: WindowAssign, below: bool = False) -> Node:
    """The final stage's plan with the on-time window column passed from its input up to its
    window (the stage's batch SQL names its columns)."""
    if isinstance(node, StageInput):
        return replace(node, columns=node.columns + (ON_TIME_WINDOW,))
    if node is assign:
        return replace(node, input=_carrying_window(assign.input, assign, below=True))
    if below and isinstance(node, Calc):
        carried = node.projections + ((ON_TIME_WINDOW, exp.column(ON_TIME_WINDOW)),)
        return replace(node, input=_carrying_window(node.input, assign, below), projections=carried)
    if not below and isinstance(node, Unary) and _reaches(node, assign):
        return replace(node, input=_carrying_window(node.input, assign))
    return node


def _reaches(node: Node, assign: WindowAssign) -> bool:
    return any(n is assign for n in node.walk())


def rewritten_sql(plan: Plan, assigns: tuple[WindowAssign, ...], sql: str) -> str:
    """The SQL with the late window's window(...) and window.start / .end replaced by the
    precomputed on-time window column; another window (over the first one's window_time) is
    left as Spark's window(...)."""
    spec = plan.spec.model_copy(update={"sql": window_times_written_out(sql)})
    tree = parse_select(spec)
    late_selects = {id(s) for s in tree.find_all(exp.Select) if any(_over(c, assigns) for c in _window_calls(s))}

    def swap(node):
        if _is_window_call(node):
            if _over(node, assigns):
                return exp.column(ON_TIME_WINDOW)
            return exp.Anonymous(this="window", expressions=node.expressions)
        if isinstance(node, exp.Column) and node.table.lower() == WINDOW:
            if id(node.find_ancestor(exp.Select)) in late_selects:
                return exp.Dot(this=exp.column(ON_TIME_WINDOW), expression=exp.to_identifier(node.name))
            return exp.column(node.name, table="window")
        return node

    return tree.transform(swap, copy=False).sql("spark")


def _is_window_call(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == WINDOW


def _window_calls(select: exp.Select) -> list[exp.Anonymous]:
    group = select.args.get("group")
    return [e for e in (group.expressions if group is not None else []) if _is_window_call(e)]


def _over(call: exp.Anonymous, assigns: tuple[WindowAssign, ...]) -> bool:
    time = call.expressions[0] if call.expressions else None
    names = {assign.window.time_col.lower() for assign in assigns}
    return isinstance(time, exp.Column) and time.name.lower() in names
