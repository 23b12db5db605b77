"""Plan nodes: what the query computes, independent of how the stream or batch job runs it.

Nodes are frozen and compared by identity, so passes can key their annotations by node.
Class-level markers say what a pass needs to know about a kind of node, instead of isinstance
chains: `stateful` (keeps state across micro-batches), `passes_changes` (emits what it receives,
row by row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from sqlglot import exp

from jobs.changelog.columns import WINDOW_END, WINDOW_START
from jobs.changelog.schema import SourceSchema
from jobs.spec.intervals import describe


@dataclass(frozen=True, eq=False)
class Node:
    stateful: ClassVar[bool] = False
    passes_changes: ClassVar[bool] = False

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    @property
    def output_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    def walk(self) -> Iterator[Node]:
        """Children first, then the node: the order bottom-up passes need."""
        for child in self.inputs:
            yield from child.walk()
        yield self


@dataclass(frozen=True, eq=False)
class Unary(Node):
    """For nodes with one input (the dataclass field `input`)."""

    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


class StagedInput(Node):
    """A leaf: a changelog the stream job stages and replays (a source, or an earlier stage's
    change data feed), named `table` and keyed by `primary_key` (empty: a multiset)."""

    table: str
    primary_key: tuple[str, ...]

    @property
    def insert_only(self) -> bool:
        return False


@dataclass(frozen=True, eq=False)
class ChangelogSource(StagedInput):
    """One of the spec's sources."""

    table: str
    schema: SourceSchema
    format: str
    primary_key: tuple[str, ...]

    @property
    def output_names(self):
        return self.schema.names

    @property
    def insert_only(self) -> bool:
        return self.format == "json"


@dataclass(frozen=True, eq=False)
class Calc(Unary):
    """Filter then project, row by row (Flink's Calc). Keeps each row's weight."""

    input: Node
    projections: tuple[tuple[str, exp.Expression], ...]
    condition: exp.Expression | None = None
    passes_changes: ClassVar[bool] = True

    @property
    def output_names(self):
        return tuple(name for name, _ in self.projections)


@dataclass(frozen=True)
class AggCall:
    """One aggregate over an input column (None for COUNT(*))."""

    func: str  # SUM, COUNT, AVG, MIN, MAX
    arg: str | None
    distinct: bool
    name: str

    @property
    def invertible(self) -> bool:
        """Can a retraction be applied by subtracting? (MIN, MAX and DISTINCT cannot.)"""
        return self.func in ("SUM", "COUNT", "AVG") and not self.distinct

    def sql(self) -> str:
        inner = "*" if self.arg is None else ("DISTINCT " if self.distinct else "") + self.arg
        return f"{self.func}({inner})"


@dataclass(frozen=True, eq=False)
class GroupAggregate(Unary):
    input: Node
    group_keys: tuple[str, ...]
    aggregates: tuple[AggCall, ...]
    stateful: ClassVar[bool] = True

    @property
    def output_names(self):
        return self.group_keys + tuple(a.name for a in self.aggregates)

    @property
    def is_global(self) -> bool:
        """An aggregate without GROUP BY: always exactly one output row, as in batch SQL."""
        return not self.group_keys


@dataclass(frozen=True)
class WindowSpec:
    """Spark's window(time_col, size[, slide]): tumbling when slide == size, hopping otherwise;
    session_window(time_col, gap) with `session` (size and slide are the gap)."""

    time_col: str
    size: timedelta
    slide: timedelta
    size_sql: str
    slide_sql: str
    session: bool = False

    @property
    def tumbling(self) -> bool:
        return self.size == self.slide and not self.session

    def spark_sql(self) -> str:
        if self.session:
            return f"session_window({self.time_col}, '{self.size_sql}')"
        slide = "" if self.tumbling else f", '{self.slide_sql}'"
        return f"window({self.time_col}, '{self.size_sql}'{slide})"

    def describe(self) -> str:
        if self.session:
            return f"SESSION(time_col=[{self.time_col}], gap=[{describe(self.size)}])"
        if self.tumbling:
            return f"TUMBLE(time_col=[{self.time_col}], size=[{describe(self.size)}])"
        return f"HOP(time_col=[{self.time_col}], size=[{describe(self.size)}], slide=[{describe(self.slide)}])"


@dataclass(frozen=True, eq=False)
class WindowAssign(Unary):
    """Assign each row to its windows (one for tumbling, size/slide for hopping) as
    __wstart / __wend, and leave out rows whose window the watermark had already closed when they
    arrived: those are late (see the late-events table)."""

    input: Node
    window: WindowSpec
    watermark: timedelta
    bounded: bool = True  # the source is a finished changelog: every window closes at its end
    passes_changes: ClassVar[bool] = True

    @property
    def output_names(self):
        return self.input.output_names + (WINDOW_START, WINDOW_END)


@dataclass(frozen=True, eq=False)
class WindowAggregate(GroupAggregate):
    """A group aggregate whose group keys include the window (__wstart, __wend)."""

    window: WindowSpec
    emit: str = "final"

    @property
    def other_keys(self) -> tuple[str, ...]:
        return tuple(k for k in self.group_keys if k not in (WINDOW_START, WINDOW_END))


@dataclass(frozen=True, eq=False)
class SessionAggregate(Unary):
    """GROUP BY session_window(ts, gap), keys: per key, the live rows' event times split where two
    follow each other by more than the gap; a session is [first, last + gap). A change re-forms
    the sessions of its key, which grow, merge, shrink or split exactly as the batch result's
    (Flink's streaming sessions only grow and merge). A change is late when the session it falls
    into, merged with its key's open sessions, has closed (operators/session/lateness.py)."""

    input: Node
    group_keys: tuple[str, ...]  # the keys beside the session
    aggregates: tuple[AggCall, ...]
    window: WindowSpec
    watermark: timedelta
    bounded: bool = True
    emit: str = "final"
    stateful: ClassVar[bool] = True

    @property
    def output_names(self):
        return (WINDOW_START, WINDOW_END) + self.group_keys + tuple(a.name for a in self.aggregates)

    @property
    def other_keys(self) -> tuple[str, ...]:
        return self.group_keys


@dataclass(frozen=True, eq=False)
class Deduplicate(Unary):
    """ROW_NUMBER() OVER (PARTITION BY keys ORDER BY order_col) <= limit: per key, the first (ASC)
    or last (DESC) `limit` live rows by an explicit ordering column; deduplication when limit is
    1 (Flink's Deduplicate), Top-N otherwise (Flink's Rank). Each row is output with its row
    number, so the enclosing query's `rn = 1` or `rn <= N` holds. The ranking subquery may leave
    the ordering or partition column out of its SELECT: `columns` are the input columns it keeps.
    Ties are broken by every other input column, so the stream and the batch keep the same rows."""

    input: Node
    keys: tuple[str, ...]
    order_col: str
    keep: str  # "first" (ORDER BY ... ASC) or "last" (DESC)
    row_number: str
    limit: int = 1
    columns: tuple[str, ...] | None = None  # None: every input column
    stateful: ClassVar[bool] = True

    @property
    def selected(self) -> tuple[str, ...]:
        return self.columns if self.columns is not None else self.input.output_names

    @property
    def output_names(self):
        return self.selected + (self.row_number,)

    @property
    def is_top_n(self) -> bool:
        return self.limit > 1

    @property
    def descending(self) -> bool:
        return self.keep == "last"

    @property
    def ordering(self) -> tuple[str, ...]:
        """The columns the rows of a key are ranked by, all in one direction: the ordering column,
        then every other column to break ties."""
        return (self.order_col,) + tuple(c for c in self.input.output_names if c != self.order_col)


@dataclass(frozen=True)
class TimeBounds:
    """left_time BETWEEN right_time + lower AND right_time + upper."""

    left_time: str  # a left output column: the left source's event time
    right_time: str
    lower: timedelta
    upper: timedelta

    def describe(self) -> str:
        low, high = _plus(self.lower), _plus(self.upper)
        return f"{self.left_time} BETWEEN {self.right_time}{low} AND {self.right_time}{high}"


def _plus(offset: timedelta) -> str:
    if not offset:
        return ""
    return f" + {describe(offset)}" if offset > timedelta(0) else f" - {describe(-offset)}"


@dataclass(frozen=True, eq=False)
class Join(Node):
    """A regular equi-join of two changelogs: INNER, LEFT, RIGHT or FULL, with an optional extra
    (non-equi) condition. Output columns are the left's then the right's (renamed where they
    clash, see the builder). A semi (anti) join, from `col IN (SELECT ...)` or `[NOT] EXISTS`,
    outputs the left rows that have (have no) matching right row: the left's columns only."""

    left: Node
    right: Node
    kind: str  # inner | left | right | full | semi | anti
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    output: tuple[str, ...]  # names of left columns then right columns
    condition: exp.Expression | None = None  # over the output names
    time_bounds: TimeBounds | None = None  # an interval join's (plan/interval_join.py)
    stateful: ClassVar[bool] = True

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def output_names(self):
        return self.output

    @property
    def left_output(self) -> tuple[str, ...]:
        return self.output[: len(self.left.output_names)]

    @property
    def right_output(self) -> tuple[str, ...]:
        return self.output[len(self.left.output_names) :]

    @property
    def filters_left(self) -> bool:
        """A semi or anti join: the left rows, filtered by the right's."""
        return self.kind in ("semi", "anti")


@dataclass(frozen=True, eq=False)
class TemporalJoin(Join):
    """An event-time temporal join, `JOIN <table> FOR SYSTEM_TIME AS OF <left time>` (Flink's
    versioned-table join): each row of an insert-only left side is joined with the right
    source's version, per primary key, whose time is the latest at or before the row's time. A
    version is a +I or +U row at its own time; a -D puts a deletion at the deleted row's time
    (the later of two changes at one time wins); a -U is not a version. INNER drops a row
    without a live version, LEFT pads it with NULLs. Keys and output as a regular join's; no
    extra condition (plan/temporal_join.py)."""

    left_time: str = ""  # the left output column the version is looked up at
    right_time: str = ""  # the right output column: each version's time

    @property
    def versioned_table(self) -> ChangelogSource:
        """The source joined FOR SYSTEM_TIME AS OF (the right side is it, or its columns renamed)."""
        return next(n for n in self.right.walk() if isinstance(n, ChangelogSource))


@dataclass(frozen=True, eq=False)
class LookupJoin(Unary):
    """A join against an external dimension service (Flink's lookup join): each input row, a
    retraction included, is enriched by looking up its key when it arrives. Stateless: INNER drops
    rows without a dimension row, LEFT pads them with nulls. Output: the input's columns, then the
    lookup table's (renamed where they clash)."""

    input: Node
    lookup: str  # the spec's lookups.<name>
    kind: str  # inner | left
    input_keys: tuple[str, ...]  # input columns, in the order of the lookup's key
    lookup_columns: tuple[str, ...]  # the lookup table's columns (its key, then its output)
    output: tuple[str, ...]  # input names then the lookup columns' plan names
    passes_changes: ClassVar[bool] = True

    @property
    def output_names(self):
        return self.output

    @property
    def lookup_output(self) -> tuple[str, ...]:
        return self.output[len(self.input.output_names) :]


@dataclass(frozen=True, eq=False)
class OverAggregate(Unary):
    """OVER aggregations and LAG (Flink's OverAggregate): each input row with window functions
    over its partition's rows ordered by one column, ascending, all under one window
    (plan/over.py). Output: the input's columns, then one column per call."""

    input: Node
    partition_keys: tuple[str, ...]
    order_col: str
    event_time: bool  # ordered by the input's event time (Flink: insert-only input)
    calls: tuple[tuple[str, exp.Expression], ...]  # (name, the window function, plan names inside)
    stateful: ClassVar[bool] = True

    @property
    def output_names(self):
        return self.input.output_names + tuple(name for name, _ in self.calls)


@dataclass(frozen=True, eq=False)
class UnionAll(Node):
    """UNION ALL: the weighted changelogs of the branches, side by side (weights simply add)."""

    branches: tuple[Node, ...]
    passes_changes: ClassVar[bool] = True

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.branches

    @property
    def output_names(self):
        return self.branches[0].output_names


@dataclass(frozen=True, eq=False)
class StageInput(StagedInput):
    """The change data feed of an earlier stage's intermediate Delta table, read by a later stage
    as a keyed changelog (or a multiset when the stage output has no key). Its column types are
    the table's own: the earlier stage writes it with the types Spark gives its batch SQL."""

    table: str
    columns: tuple[str, ...]
    primary_key: tuple[str, ...]
    stage: int
    # The stage table's timestamp column whose type its rows' watermark takes, when a window
    # reads the rows by an event time (changelog/feed_watermarks.py).
    event_time: str | None = None

    @property
    def output_names(self):
        return self.columns


@dataclass(frozen=True, eq=False)
class Sink(Unary):
    input: Node
    table: str
    primary_key: tuple[str, ...] | None  # None: the query's upsert key
    upsert_materialize: str
    changelog_mode: str | None = "upsert"  # append | upsert | retract; None: by the query's key
    passes_changes: ClassVar[bool] = True

    @property
    def output_names(self):
        return self.input.output_names
