"""Spec -> parsed SQL -> plan nodes -> annotated plan, the path every command takes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlglot import exp

import pyarrow as pa

from jobs.changelog.kinds import ChangelogMode, RowKind
from jobs.changelog.schema import Column, SourceSchema
from jobs.errors import SqlError
from jobs.plan.builder import build_plan
from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.plan.nodes import (Annotations, Calc, ChangelogSource, GroupAggregate,
                             Node, Sink, WindowAggregate, WindowAssign)
from jobs.plan.passes import PASSES
from jobs.plan.passes.modify_kinds import DELETE, INSERT, UPDATE
from jobs.plan.passes.update_kinds import BEFORE_AND_AFTER
from jobs.plan.sql import non_deterministic_calls, parse_select
from jobs.plan.stages import Stage, split_stages
from jobs.spec.model import QuerySpec


@dataclass(frozen=True)
class QueryPlan:
    spec: QuerySpec
    root: Sink
    notes: Annotations
    stage: Stage | None = None  # set on the plan of one stage (see stages())
    full: QueryPlan | None = None  # the whole query's plan, on a stage's plan
    warnings: tuple[str, ...] = ()  # what makes the query uncheckable, e.g. a rand() call

    @property
    def is_intermediate(self) -> bool:
        """The plan of a stage whose result feeds another stage (not the query's sink)."""
        return self.stage is not None and not self.stage.is_final

    @property
    def sql(self) -> str:
        """The batch equivalent: the user's SQL, or an intermediate stage's printed SQL."""
        return self.stage.batch_sql() if self.is_intermediate else self.spec.sql

    @property
    def name(self) -> str:
        return self.root.table

    @property
    def real_sources(self) -> list[ChangelogSource]:
        """The spec's sources the query reads (a stage may read an earlier stage instead)."""
        return (self.full or self).sources

    @property
    def sink_mode(self) -> str:
        return self.root.changelog_mode

    @property
    def write_mode(self) -> str:
        """How the Delta table is written: "upsert" (MERGE by the sink key) or "retract" (a
        multiset: MERGE by every column, with a copy count). An append sink takes inserts only,
        so it is written by its key when the query has one, else as a multiset."""
        if self.sink_mode == "retract" or (self.sink_mode == "append" and not self.sink_key):
            return "retract"
        return "upsert"

    @property
    def materialize(self) -> bool:
        return bool(self.notes.materialize)

    def stages(self, schema_of=None) -> list[QueryPlan]:
        """One plan per stage, in the order they run; the last writes the sink. `schema_of`
        types the intermediate tables (without it, names only: enough for explain)."""
        split = split_stages(self.root, self.notes, schema_of or _names_only)
        return [QueryPlan(self.spec, stage.root, _annotate(stage.root, self.spec), stage, self)
                for stage in split]

    @property
    def sink_key(self) -> tuple[str, ...]:
        return self.notes.sink_key[0]

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.root.output_names

    @property
    def sources(self) -> list[ChangelogSource]:
        return [n for n in self.root.walk() if isinstance(n, ChangelogSource)]

    @property
    def aggregate(self) -> GroupAggregate | None:
        return next((n for n in self.root.walk() if isinstance(n, GroupAggregate)), None)

    @property
    def window(self) -> WindowAggregate | None:
        node = self.aggregate
        return node if isinstance(node, WindowAggregate) else None

    @property
    def window_assign(self) -> WindowAssign | None:
        return next((n for n in self.root.walk() if isinstance(n, WindowAssign)), None)

    def window_end_sql(self) -> str:
        """A Spark SQL expression for each output row's window end, from the output columns
        (window.end if selected, else window.start + size)."""
        calc = self.root.input
        for name, expr in calc.projections if isinstance(calc, Calc) else ():
            if isinstance(expr, exp.Column) and expr.name == WINDOW_END:
                return f"`{name}`"
        for name, expr in calc.projections if isinstance(calc, Calc) else ():
            if isinstance(expr, exp.Column) and expr.name == WINDOW_START:
                size = self.window.window.size // timedelta(microseconds=1)
                return f"timestamp_micros(unix_micros(`{name}`) + {size})"
        raise ValueError("the output has no window column")

    def window_column(self) -> tuple[str, str]:
        """(output column, 'window_start' | 'window_end'): the sink key column naming the window."""
        calc = self.root.input
        fields = {WINDOW_START: "window_start", WINDOW_END: "window_end"}
        for name, expr in calc.projections if isinstance(calc, Calc) else ():
            if isinstance(expr, exp.Column) and expr.name in fields and name in self.sink_key:
                return name, fields[expr.name]
        raise ValueError("the sink key has no window column")

    def changelog_mode(self, node: Node) -> ChangelogMode:
        kinds = self.notes.modify_kinds[node]
        rows = set()
        if INSERT in kinds:
            rows.add(RowKind.INSERT)
        if UPDATE in kinds:
            rows.add(RowKind.UPDATE_AFTER)
            if self.notes.update_kinds[node] == BEFORE_AND_AFTER:
                rows.add(RowKind.UPDATE_BEFORE)
        if DELETE in kinds:
            rows.add(RowKind.DELETE)
        return ChangelogMode(rows)


def plan_query(spec: QuerySpec) -> QueryPlan:
    select = parse_select(spec)
    root = build_plan(spec, select)
    notes = Annotations()
    for run_pass in PASSES:
        try:
            run_pass(root, notes)
        except SqlError as exc:
            if exc.where:
                raise
            raise SqlError(exc.message, where=str(spec.spec_path)) from None
    _check_windows_single_stage(spec, root)
    return QueryPlan(spec, root, notes, warnings=non_deterministic_calls(spec, select))


def _annotate(root: Sink, spec: QuerySpec) -> Annotations:
    notes = Annotations()
    for run_pass in PASSES:
        run_pass(root, notes)
    return notes


def _names_only(node: Node) -> SourceSchema:
    return SourceSchema(tuple(Column(n, "STRING", pa.string()) for n in node.output_names))


def _check_windows_single_stage(spec: QuerySpec, root: Sink) -> None:
    stateful = [n for n in root.walk() if n.stateful]
    if any(isinstance(n, WindowAssign) for n in root.walk()) and len(stateful) > 1:
        raise SqlError("a windowed aggregate must read a source directly (not a join, a "
                       "deduplication or another aggregate)", where=str(spec.spec_path))
