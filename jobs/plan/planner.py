"""Spec -> parsed SQL -> plan nodes -> annotated plan, the path every command takes."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.changelog.kinds import ChangelogMode, RowKind
from jobs.errors import SqlError
from jobs.plan.builder import build_plan
from jobs.plan.nodes import Annotations, ChangelogSource, GroupAggregate, Node, Sink
from jobs.plan.passes import PASSES
from jobs.plan.passes.modify_kinds import DELETE, INSERT, UPDATE
from jobs.plan.passes.update_kinds import BEFORE_AND_AFTER
from jobs.plan.sql import parse_select
from jobs.spec.model import QuerySpec


@dataclass(frozen=True)
class QueryPlan:
    spec: QuerySpec
    root: Sink
    notes: Annotations

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
    return QueryPlan(spec, root, notes)
