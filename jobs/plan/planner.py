"""Spec -> parsed SQL -> plan nodes -> annotated plan, cut into stages: the path every command takes.

Everything is computed once, here: the passes over the whole query, the stages and each stage's
own annotations. What comes out is immutable.
"""

from __future__ import annotations

from sqlglot import exp

from jobs.changelog.schema import unsafe_name_problem
from jobs.errors import SpecError, SqlError
from jobs.plan.annotations import Annotations
from jobs.plan.builder import build_plan
from jobs.plan.event_time import renamed_event_time, window_times_written_out
from jobs.plan.nodes import (
    SessionAggregate,
    Sink,
    WindowAssign,
)
from jobs.plan.passes import PASSES
from jobs.plan.plan import Plan, StagePlan
from jobs.plan.sql import non_deterministic_calls, parse_select
from jobs.plan.stages import split_stages
from jobs.plan.temporal_join import batch_sql
from jobs.plan.window_rows import check_window_rows
from jobs.spec.model import QuerySpec


def plan_query(spec: QuerySpec) -> Plan:
    try:
        return _plan(spec)
    except RecursionError:
        raise SqlError("the query is nested too deep to plan", where=str(spec.spec_path)) from None


def _plan(spec: QuerySpec) -> Plan:
    select = parse_select(spec)
    root = build_plan(spec, select)
    _check_output_names(spec, root)
    notes = _annotate(spec, root)
    _check_windows_single_stage(spec, root)
    check_window_rows(spec, root)
    final_sql = _batch_sql(spec, select)
    stages = tuple(
        StagePlan(
            spec,
            cut.number,
            cut.root,
            _annotate(spec, cut.root),
            cut.batch_sql or final_sql,
            is_final=cut.original is None,
        )
        for cut in split_stages(spec, root, notes)
    )
    _check_engine(spec, stages)
    warnings = non_deterministic_calls(spec, select) + _forgetting_state(spec, stages)
    return Plan(spec, root, notes, stages, warnings=warnings)


def _batch_sql(spec: QuerySpec, select: exp.Expression) -> str:
    """The user's SQL as Spark runs it in batch, with lockstep's extensions written out."""
    return batch_sql(spec, select) or window_times_written_out(spec.sql)


def _forgetting_state(spec: QuerySpec, stages: tuple[StagePlan, ...]) -> tuple[str, ...]:
    """The consequence of a state TTL, for a query with an aggregate (the state it applies to)."""
    aggregates = [stage.aggregate for stage in stages if stage.aggregate is not None]
    if spec.stream.state_ttl is None or not aggregates:
        return ()
    kept_values = [c for node in aggregates for c in node.aggregates if not c.invertible]
    if kept_values:  # their live values are a state of their own, which the TTL does not reach
        raise SpecError(
            f"stream.state_ttl applies to SUM, COUNT and AVG only, not to "
            f"{kept_values[0].func}({'DISTINCT ' if kept_values[0].distinct else ''}{kept_values[0].arg})",
            where=str(spec.spec_path),
        )
    return (
        f"{spec.spec_path}: stream.state_ttl is {spec.stream.state_ttl}: a group unchanged for that "
        f"long is forgotten (as Flink's table.exec.state.ttl), so the stream's result may differ "
        f"from the batch's, which sees every row",
    )


def _check_engine(spec: QuerySpec, stages: tuple[StagePlan, ...]) -> None:
    """What the spark engine does not run yet is refused before anything runs, naming it
    (docs/engines.md lists what each engine runs)."""
    if spec.stream.engine != "spark":
        return
    missing = _not_on_spark_engine(spec, stages)
    if missing:
        raise SpecError(
            f"stream.engine spark does not run {missing} yet; stream.engine local does (docs/engines.md)",
            where=str(spec.spec_path),
        )


def _not_on_spark_engine(spec: QuerySpec, stages: tuple[StagePlan, ...]) -> str | None:
    if spec.stream.state_ttl is not None:
        return "stream.state_ttl"
    for stage in stages:
        if stage.materialize and not any(node.stateful for node in stage.root.walk()):
            return f"the upsert materializer over a projection (sink key {', '.join(stage.sink_key)})"
    return None


def _annotate(spec: QuerySpec, root: Sink) -> Annotations:
    notes = Annotations()
    for run_pass in PASSES:
        try:
            notes = run_pass(root, notes)
        except SqlError as exc:
            if exc.where:
                raise
            raise SqlError(exc.message, where=str(spec.spec_path)) from None
    return notes


def _check_output_names(spec: QuerySpec, root: Sink) -> None:
    """The query's columns become the sink's, shown on HTML pages: no markup in their names."""
    for name in root.output_names:
        problem = unsafe_name_problem(name)
        if problem:
            raise SqlError(problem, where=str(spec.spec_path))


def _check_windows_single_stage(spec: QuerySpec, root: Sink) -> None:
    """A tumbling or hopping window's result may go on to other operators (a Top-N, a join, an
    aggregate, another window), which run as later stages over its final rows; it may read an
    earlier stage's rows by an event time they keep (plan/event_time.py, checked as the window
    is built). A session window reads a source and is the query's one stateful operator."""
    stateful = [n for n in root.walk() if n.stateful]
    for window in (n for n in root.walk() if isinstance(n, (WindowAssign, SessionAggregate))):
        # The window's own aggregate is the node right above its assignment.
        above = [n for n in stateful if n is not window and getattr(n, "input", None) is not window]
        feeds_others = any(window in list(n.walk()) for n in above)
        if isinstance(window, SessionAggregate) and len(stateful) > 1:
            raise SqlError(
                "a session window must read a source directly and its result cannot go on to another operator yet",
                where=str(spec.spec_path),
            )
        renamed = renamed_event_time(window.input, window.window.time_col)
        if renamed is not None:
            raise SqlError(
                f"window over {window.window.time_col}: use the event time under its own name, "
                f"{renamed} (its late changes are listed by that column)",
                where=str(spec.spec_path),
            )
        if feeds_others and any(n.stateful for n in window.input.walk()):
            raise SqlError(
                "a window over an earlier operator's rows (a deduplication, a Top-N, a window) must "
                "write the sink: its rows cannot go on to another operator yet",
                where=str(spec.spec_path),
            )
        if feeds_others and not window.bounded:
            raise SqlError(
                "a window whose rows go on to another operator needs a bounded source: the windows "
                "still open would be missing from that operator's rows, which the batch has",
                where=str(spec.spec_path),
            )
