"""A planned query: the whole query (`Plan`) and the stages it runs as (`StagePlan`), both built
once by the planner and never changed afterwards.

A stage is one stateful operator and what surrounds it, writing one Delta table: the sink for the
last stage, an intermediate table for the others (see stages.py). The two answer the same
questions about their own tree (its sink key, its window, how its table is written), through the
shared `Planned` view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.changelog.kinds import ChangelogMode, RowKind
from jobs.plan.annotations import Annotations
from jobs.plan.nodes import (
    Calc,
    ChangelogSource,
    GroupAggregate,
    Node,
    SessionAggregate,
    Sink,
    StagedInput,
    StageInput,
    WindowAggregate,
    WindowAssign,
)
from jobs.plan.passes.modify_kinds import DELETE, INSERT, UPDATE
from jobs.plan.passes.update_kinds import BEFORE_AND_AFTER
from jobs.spec.model import QuerySpec


class Planned:
    """Questions a plan or a stage answers from its own root and annotations."""

    root: Sink
    notes: Annotations

    @property
    def name(self) -> str:
        """The table it writes: the query's name for the sink, stage<n>_<kind> for a stage."""
        return self.root.table

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.root.output_names

    @property
    def sink_key(self) -> tuple[str, ...]:
        return self.notes.sink_key

    @property
    def sink_mode(self) -> str:
        return self.notes.sink_mode

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

    @property
    def inputs(self) -> list[StagedInput]:
        """The changelogs it reads: sources, and for a later stage the earlier stages' tables."""
        return [n for n in self.root.walk() if isinstance(n, StagedInput)]

    @property
    def aggregate(self) -> GroupAggregate | None:
        return next((n for n in self.root.walk() if isinstance(n, GroupAggregate)), None)

    @property
    def window(self) -> WindowAggregate | SessionAggregate | None:
        return next((n for n in self.root.walk() if isinstance(n, (WindowAggregate, SessionAggregate))), None)

    @property
    def sink_window(self) -> WindowAggregate | SessionAggregate | None:
        """The window whose rows the output holds: the outermost (a cascade's second)."""
        windows = [n for n in self.root.walk() if isinstance(n, (WindowAggregate, SessionAggregate))]
        return windows[-1] if windows else None

    @property
    def window_assign(self) -> WindowAssign | None:
        return next((n for n in self.root.walk() if isinstance(n, WindowAssign)), None)

    def window_end_sql(self) -> str | None:
        """A Spark SQL expression for each output row's window end, from the output columns
        (window.end if selected, else window.start + size); None when the output cannot say."""
        projections = self._final_projections()
        for name, expr in projections:
            if isinstance(expr, exp.Column) and expr.name == WINDOW_END:
                return f"`{name}`"
        window = self.sink_window
        if window is None or window.window.session:
            return None  # a session's end is not its start plus a size: only session_window.end says it
        size = window.window.size // timedelta(microseconds=1)
        for name, expr in projections:
            if isinstance(expr, exp.Column) and expr.name == WINDOW_START:
                return f"timestamp_micros(unix_micros(`{name}`) + {size})"
        return None

    def window_column(self) -> tuple[str, str]:
        """(output column, 'window_start' | 'window_end'): the sink key column naming the window."""
        fields = {WINDOW_START: "window_start", WINDOW_END: "window_end"}
        for name, expr in self._final_projections():
            if isinstance(expr, exp.Column) and expr.name in fields and name in self.sink_key:
                return name, fields[expr.name]
        raise ValueError("the sink key has no window column")

    def group_key_columns(self) -> tuple[tuple[str, str], ...] | None:
        """(group key, sink column) for every sink key column, when each is a group key as it is;
        None when one is computed (CONCAT(g, k)) or the sink key leaves a group key out. A window
        is named by its start or its end alike."""
        node = self.aggregate
        if node is None:
            raise ValueError("the plan has no aggregate")
        if isinstance(self.root.input, Calc):
            projected = {name: expr.name for name, expr in self._final_projections() if isinstance(expr, exp.Column)}
        else:
            projected = {name: name for name in self.output_names}
        pairs = tuple((projected[k], k) for k in self.sink_key if projected.get(k) in node.group_keys)
        covered = {group for group, _ in pairs}
        if covered & {WINDOW_START, WINDOW_END}:
            covered |= {WINDOW_START, WINDOW_END}
        if len(pairs) != len(self.sink_key) or not set(node.group_keys) <= covered:
            return None
        return pairs

    def _final_projections(self) -> tuple:
        """(output column, expression over the window aggregate's columns): through the Calcs
        below the sink and the operators that keep their input's columns (a Top-N over a window's
        rows), down to the window; a column computed on the way is not followed."""
        names = {n: n for n in self.root.output_names}
        node = self.root.input
        while not isinstance(node, (GroupAggregate, SessionAggregate)) and node.inputs and names:
            if isinstance(node, Calc):
                mapped = dict(node.projections)
                names = {o: mapped[c].name for o, c in names.items() if isinstance(mapped.get(c), exp.Column)}
            below = next((i for i in node.inputs if set(names.values()) <= set(i.output_names)), None)
            if below is None:
                return ()
            node = below
        return tuple((o, exp.column(c)) for o, c in names.items()) if node is not self.root.input else ()

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


@dataclass(frozen=True)
class StagePlan(Planned):
    spec: QuerySpec
    number: int  # 1, 2, ...; the last stage writes the query's sink
    root: Sink
    notes: Annotations
    sql: str  # the batch equivalent: the user's SQL for the last stage, printed SQL for the others
    is_final: bool

    @property
    def is_intermediate(self) -> bool:
        return not self.is_final

    @property
    def stage_inputs(self) -> list[StageInput]:
        return [n for n in self.inputs if isinstance(n, StageInput)]


def _windows_of(stage: StagePlan) -> list[WindowAssign | SessionAggregate]:
    return [n for n in stage.root.walk() if isinstance(n, (WindowAssign, SessionAggregate))]


@dataclass(frozen=True)
class LateWindow:
    """A window that leaves out late changes (Plan.late_windows), its stage, and what it reads."""

    stage: StagePlan
    window: WindowAssign | SessionAggregate
    read: StagedInput


@dataclass(frozen=True)
class Plan(Planned):
    spec: QuerySpec
    root: Sink
    notes: Annotations
    stages: tuple[StagePlan, ...]  # in the order they run
    warnings: tuple[str, ...] = ()  # what makes the query uncheckable, e.g. a rand() call

    @property
    def sql(self) -> str:
        """The batch equivalent: the user's SQL, with a temporal join as a point-in-time join."""
        return self.final_stage.sql

    @property
    def sources(self) -> list[ChangelogSource]:
        """The spec's sources the query reads (a source joined with itself appears twice)."""
        return [n for n in self.inputs if isinstance(n, ChangelogSource)]

    @property
    def source_tables(self) -> list[str]:
        return list(dict.fromkeys(s.table for s in self.sources))

    @property
    def final_stage(self) -> StagePlan:
        return self.stages[-1]

    @property
    def late_windows(self) -> tuple[LateWindow, ...]:
        """The windows that leave out late changes, each with the changelog (a source, or an
        earlier stage's feed) it judges them in: one, or a window join's two. A window over an
        earlier window's rows finds none late: each arrives before the watermark that closed its
        window, so before its window_time."""
        for stage in self.stages:
            found = tuple(
                LateWindow(stage, window, read)
                for window in _windows_of(stage)
                for read in stage.inputs
                if window.window.time_col in read.output_names and read in list(window.walk())
            )
            if found:
                return found
        return ()

    @property
    def sink_window_input(self) -> StagedInput | None:
        """The changelog whose watermark closes the windows of the sink (its stage's input)."""
        stage = self.final_stage
        return stage.inputs[0] if stage.window is not None and stage.inputs else None

    @property
    def intermediate_stages(self) -> tuple[StagePlan, ...]:
        return self.stages[:-1]
