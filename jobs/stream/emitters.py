"""Emitters: what one micro-batch emits into the stage's table, one kind per query shape, all
behind the Emitter protocol the foreachBatch handler calls.

- A group aggregate: the new state of every touched group (operators/aggregate/group_sums.py's, or Spark's update
  output) is finalised (SUM from its sums, AVG as a ratio, MIN/MAX recomputed from the value multisets),
  HAVING and the SELECT expressions are applied, and a group with no live rows left (or one that
  stops passing HAVING) becomes a delete.
- A projection: the rows that passed the filter; per sink key the last change in the micro-batch
  decides: an addition upserts its image, a retraction deletes the key.
- A deduplication or a join: the operator's difference for the touched keys (see operators/), then
  the Calc above it; per sink key an added row upserts, a key with only retractions is deleted.

A retract sink takes the net copies gained or lost per row instead; a sink behind the upsert
materializer takes the rows in arrival order through it (operators/materialize/). With windows that
emit final results, FinalWindowEmitter (operators/window/windows.py) wraps the aggregate's emitter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.changelog.columns import COUNT, DELETE, OP, SEQ, UPSERT, WEIGHT
from jobs.plan import StagePlan
from jobs.plan.nodes import Calc
from jobs.runtime.arrow_frames import frame_of
from jobs.runtime.layout import RunLayout
from jobs.stream.operators.aggregate.driver_groups import finished_groups, finishes_on_driver
from jobs.stream.operators.aggregate.group_sums import GroupSums
from jobs.stream.operators.aggregate.multiset import ValueMultisets
from jobs.stream.operators.aggregate.streaming import AggregateState, finalize, result_columns
from jobs.stream.operators.calc import apply_calc, projections
from jobs.stream.operators.driver_rows import copies_in_order, picked_columns, upsert_rows
from jobs.stream.operators.keyed_operators import KeyedStateOperator
from jobs.stream.operators.materialize.on_lockstep_state import UpsertMaterializer
from jobs.stream.operators.materialize.on_spark_state import MaterializedRows
from jobs.stream.operators.session.on_lockstep_state import SessionOperator
from jobs.stream.operators.session.on_spark_state import SessionsOnKeyedState
from jobs.stream.writers import Changes


@dataclass(frozen=True)
class MicroBatch:
    id: int
    start: int  # changelog rows [start, end), summed over sources (one source: its positions)
    end: int
    watermark_after: int | None  # microseconds since the epoch, for sources with event time
    rows: int = 0  # changelog rows this micro-batch read, over all sources
    consumed: int = 0  # changelog rows read up to and including it, over all sources
    # The staged segment files it read, per input table (Spark's checkpoint names them).
    segments: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    timestamp_ms: int = 0  # Spark's time of the micro-batch, the same in a replay (state TTL)
    # The lowest of the inputs' watermarks after it (an interval join's, which it holds back).
    least_watermark: int | None = None


class Emitter(Protocol):
    """One micro-batch's rows for the stage table's writer, from the streaming frame's batch."""

    @property
    def reads_twice(self) -> bool:
        """Whether changes() reads the frame twice (the handler caches it then)."""

    def changes(self, spark: SparkSession, frame: DataFrame, batch: MicroBatch) -> Changes:
        """Rows tagged upsert / delete (an upsert table), or rows with their copy change (retract)."""

    def after_sink_commit(self, batch: MicroBatch) -> None:
        """Called once the micro-batch's changes are committed to the table."""


class AggregateEmitter:
    """A group aggregate: its touched groups, finalised. The micro-batch's frame is Spark's
    update output, or, where lockstep keeps the state (`sums`), the rows, from which the touched
    groups' sums are made first."""

    def __init__(
        self,
        plan: StagePlan,
        state: AggregateState,
        multisets: ValueMultisets | None,
        output: StructType,
        sums: GroupSums | None = None,
    ):
        self.plan, self.state, self.multisets, self.output, self.sums = plan, state, multisets, output, sums
        above = plan.root.input
        self.post: Calc | None = above if isinstance(above, Calc) else None
        # The expressions are the same for every micro-batch: built once, reused by each.
        self._results = result_columns(state)
        self._outputs: dict[tuple[str, ...], list] = {}
        # The finished rows have the shape finalize gives them, whatever the sink's mode: where
        # a column differs (a retract sink's copy count), finished_groups leaves them to Spark.
        self._finishes_on_driver = sums is not None and finishes_on_driver(state, self.post)

    @property
    def reads_twice(self) -> bool:
        # The sums made from the rows are a local relation: reading it twice costs nothing.
        return self.multisets is not None and self.sums is None

    def changes(self, spark: SparkSession, frame: DataFrame, batch: MicroBatch) -> Changes:
        rows = self._touched(spark, frame, batch, ())
        return Changes(rows=rows) if isinstance(rows, pa.Table) else Changes(frame=rows)

    def changed_rows(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> pa.Table:
        """The touched groups as output rows tagged upsert / delete (plus `hidden` state
        columns), on the driver (FinalWindowEmitter's pending table takes them so)."""
        rows = self._touched(spark, frame, batch, hidden)
        return rows if isinstance(rows, pa.Table) else rows.toArrow()

    def changed_frame(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> DataFrame:
        """The touched groups as changed_rows has them, as a frame (the spark engine's open
        windows table takes them so: operators/window/on_spark_state.py)."""
        rows = self._touched(spark, frame, batch, hidden)
        return frame_of(spark, rows) if isinstance(rows, pa.Table) else rows

    def _touched(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...]
    ) -> pa.Table | DataFrame:
        """The touched groups' output rows: finished on the driver where they can be (an Arrow
        table), else in Spark (a frame)."""
        if self.sums is None:
            return self._finished(spark, frame, batch, hidden)
        groups = self.sums.after(frame, batch.id, batch.timestamp_ms, batch.segments)
        values = None
        if self.multisets is not None:  # computed once: it records the micro-batch's values
            values = self.multisets.results(spark, groups.select([*self.state.slot_key, COUNT]), batch.id)
        rows = None
        if self._finishes_on_driver and not isinstance(values, DataFrame):
            rows = finished_groups(groups, self.state, self.post, self.output, hidden, values)
        return rows if rows is not None else self._finished(spark, frame_of(spark, groups), batch, hidden, values)

    def after_sink_commit(self, batch: MicroBatch) -> None:
        pass

    def _finished(
        self,
        spark: SparkSession,
        updated: DataFrame,
        batch: MicroBatch,
        hidden: tuple[str, ...],
        values: pa.Table | DataFrame | None = None,
    ) -> DataFrame:
        """The touched groups' new sums (Spark's update output's shape) finalised in Spark, with
        their MIN / MAX / DISTINCT `values` when these were computed already."""
        if self.multisets is not None and values is None:
            counts = updated.select(*self.state.slot_key, COUNT).toArrow()
            values = self.multisets.results(spark, counts, batch.id)
        recomputed = frame_of(spark, values) if isinstance(values, pa.Table) else values
        groups = finalize(updated, self.state, recomputed, self._results)
        if hidden not in self._outputs:
            self._outputs[hidden] = self._output_columns(hidden)
        return groups.select(*self._outputs[hidden])

    def _output_columns(self, hidden: tuple[str, ...]) -> list:
        """The finalised groups' output columns, `hidden` and the upsert / delete tag."""
        alive = F.lit(True) if self.state.node.is_global else F.col(COUNT) > 0
        if self.post is not None:
            if self.post.condition is not None:
                alive = alive & F.coalesce(F.expr(self.post.condition.sql("spark")), F.lit(False))
            columns = [value for _, value in projections(self.post)]
        else:
            columns = [F.col(n) for n in self.state.node.output_names]
        op = F.when(alive, F.lit(UPSERT)).otherwise(F.lit(DELETE)).alias(OP)
        return [*_typed(columns, self.output), *[F.col(h) for h in hidden], op]


class ChangeRows:
    """Weighted change rows (the query's columns and __w) into what the sink's writer takes."""

    def __init__(
        self,
        plan: StagePlan,
        output: StructType,
        layout: RunLayout,
        ordered_by: str | None,
        materialized: MaterializedRows | None = None,
    ):
        self.plan, self.output, self.ordered_by, self.materialized = plan, output, ordered_by, materialized
        names = tuple(f.name for f in output.fields)
        self.materializer = (
            UpsertMaterializer(plan.sink_key, names, layout.materializer)
            if plan.materialize and plan.write_mode == "upsert" and materialized is None
            else None
        )
        # Built once, reused by every micro-batch (each Column is a round trip to the JVM).
        ordered = [F.col(ordered_by)] if ordered_by else []
        self._selected = [*_typed([F.col(f"`{n}`") for n in plan.output_names], output), F.col(WEIGHT), *ordered]
        self._copies = F.explode(F.array_repeat(F.signum(WEIGHT).cast("int"), F.abs(F.col(WEIGHT)).cast("int")))
        self._names = [F.col(f"`{f.name}`") for f in output.fields if f.name != COUNT]
        self._latest = _latest_first(
            [F.col(f"`{k}`") for k in plan.sink_key], F.col(ordered_by).desc() if ordered_by else F.col(WEIGHT).desc()
        )
        self._tagged = [*self._names, _tag()]

    def table(self, rows: DataFrame, batch_id: int) -> Changes:
        typed = rows.select(*self._selected)
        if self.plan.write_mode == "retract":
            return Changes(
                frame=typed.groupBy(*self._names)
                .agg(F.sum(WEIGHT).cast("bigint").alias(COUNT))
                .where(F.col(COUNT) != 0)
            )
        if self.materialized is not None:  # the spark engine's, on the executors (materialize/on_spark_state.py)
            return Changes(frame=self.materialized.apply(typed, batch_id))
        if self.materializer is not None:  # ordered, stateful, on the driver (materialize/on_lockstep_state.py)
            return Changes(rows=self.materializer.apply(self._in_order(typed), batch_id))
        return Changes(frame=self._net_per_key(typed))

    def after_sink_commit(self, batch_id: int) -> None:
        if self.materialized is not None:
            self.materialized.after_sink_commit(batch_id)

    def on_driver(self, difference: pa.Table, post: Calc | None, batch_id: int) -> Changes | None:
        """The upsert rows of a difference on the driver, when only picking columns is left to
        do (operators/driver_rows.py), through the materializer if the sink has one; None when Spark must
        compute the rest."""
        if self.plan.write_mode != "upsert" or self.ordered_by:
            return None
        columns = picked_columns(difference, post, self.plan.output_names)
        if columns is None:
            return None
        if self.materializer is not None:
            copies = copies_in_order(difference, columns, self.output)
            return None if copies is None else Changes(rows=self.materializer.apply(copies, batch_id))
        rows = upsert_rows(difference, columns, self.output, self.plan.sink_key)
        return None if rows is None else Changes(rows=rows)

    def _in_order(self, typed: DataFrame) -> pa.Table:
        """Arrival order where the rows have one; else retractions before additions (a
        difference has no order, and a retraction never follows the row that replaces it).
        Sorted on the driver, where the rows go anyway: Spark's sort would first sample the
        rows in a job of its own to pick its range partitions."""
        copies = typed.withColumn(WEIGHT, self._copies).toArrow()
        order = pc.sort_indices(copies, sort_keys=[(self.ordered_by or WEIGHT, "ascending", "at_start")])
        in_order = copies.take(order)
        return in_order.drop_columns([self.ordered_by]) if self.ordered_by else in_order

    def _net_per_key(self, typed: DataFrame) -> DataFrame:
        """Per sink key, the last change (arrival order), or an addition over a retraction."""
        return typed.withColumn("__last", self._latest).where("__last = 1").select(*self._tagged)

    def net_per_key(self, rows: DataFrame, hidden: tuple[str, ...]) -> DataFrame:
        """The upsert / delete rows of weighted rows, keeping the `hidden` columns (a window's end
        for the spark engine's open windows table)."""
        typed = rows.select(*self._selected, *[F.col(h) for h in hidden])
        latest = typed.withColumn("__last", self._latest).where("__last = 1")
        return latest.select(*self._names, *[F.col(h) for h in hidden], _tag())


def _latest_first(key: list[Column], order: Column) -> Column:
    """1 for the row of its key that comes first in `order`."""
    return F.row_number().over(Window.partitionBy(*key).orderBy(order))


def _tag() -> Column:
    """upsert for an addition, delete for a retraction."""
    return F.when(F.col(WEIGHT) > 0, F.lit(UPSERT)).otherwise(F.lit(DELETE)).alias(OP)


class ProjectionEmitter:
    """A query without a stateful operator: the change rows, per sink key."""

    reads_twice = False

    def __init__(self, plan: StagePlan, output: StructType, layout: RunLayout):
        self.rows = ChangeRows(plan, output, layout, ordered_by=SEQ)

    def after_sink_commit(self, batch: MicroBatch) -> None:
        pass

    def changes(self, spark: SparkSession, rows: DataFrame, batch: MicroBatch) -> Changes:
        return self.rows.table(rows, batch.id)


class KeyedEmitter:
    """A deduplication or a join, then the Calc above it (if any)."""

    def __init__(
        self,
        plan: StagePlan,
        operator,
        output: StructType,
        layout: RunLayout,
        materialized: MaterializedRows | None = None,
    ):
        self.operator = operator
        # lockstep's state reads the frame once, by the net changes' toArrow (the rest works on
        # driver rows); Spark's keyed state twice (the rows before, and after), in Spark.
        self.reads_twice = isinstance(operator, KeyedStateOperator)
        above = plan.root.input
        self.post: Calc | None = above if isinstance(above, Calc) else None
        self.rows = ChangeRows(plan, output, layout, ordered_by=None, materialized=materialized)

    def after_sink_commit(self, batch: MicroBatch) -> None:
        self.rows.after_sink_commit(batch.id)

    def changed_frame(
        self, spark: SparkSession, delta: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> DataFrame:
        """The touched keys' rows tagged upsert / delete with the `hidden` columns: what the
        spark engine's open windows table takes (operators/window/on_spark_state.py), a window's groups being
        recomputed on the keyed state."""
        difference = self.operator.changes(spark, delta, batch.id, batch.segments)
        if isinstance(difference, pa.Table):
            difference = frame_of(spark, difference)
        if self.post is not None:
            difference = apply_calc(difference, self.post, [WEIGHT, *hidden])
        return self.rows.net_per_key(difference, hidden)

    def changes(self, spark: SparkSession, delta: DataFrame, batch: MicroBatch) -> Changes:
        difference = self.operator.changes(spark, delta, batch.id, batch.segments)
        if isinstance(difference, pa.Table):  # computed on the driver: finished there if it can be
            finished = self.rows.on_driver(difference, self.post, batch.id)
            if finished is not None:
                return finished
            difference = frame_of(spark, difference)
        if self.post is not None:
            difference = apply_calc(difference, self.post, [WEIGHT])
        return self.rows.table(difference, batch.id)


class SessionEmitter:
    """Session windows: the sessions the operator re-formed, then the Calc above them, one row per
    sink key (an addition over a retraction). With emit: final, FinalWindowEmitter wraps it."""

    def __init__(self, plan: StagePlan, operator, output: StructType):
        self.plan, self.operator, self.output = plan, operator, output
        self.reads_twice = isinstance(operator, KeyedStateOperator)  # see KeyedEmitter
        above = plan.root.input
        self.post: Calc | None = above if isinstance(above, Calc) else None
        # Built once, reused by every micro-batch (each Column is a round trip to the JVM).
        self._latest = _latest_first([F.col(f"`{k}`") for k in plan.sink_key], F.col(WEIGHT).desc())
        self._outputs: dict[tuple[str, ...], list] = {}

    def changes(self, spark: SparkSession, frame: DataFrame, batch: MicroBatch) -> Changes:
        return Changes(frame=self.changed_groups(spark, frame, batch))

    def after_sink_commit(self, batch: MicroBatch) -> None:
        pass

    def changed_rows(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> pa.Table:
        return self.changed_groups(spark, frame, batch, hidden).toArrow()

    def changed_frame(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> DataFrame:
        return self.changed_groups(spark, frame, batch, hidden)

    def changed_groups(
        self, spark: SparkSession, frame: DataFrame, batch: MicroBatch, hidden: tuple[str, ...] = ()
    ) -> DataFrame:
        """The changed sessions tagged upsert / delete (plus `hidden` operator columns)."""
        rows = self.operator.changes(spark, frame, batch.id)
        if self.post is not None:
            rows = apply_calc(rows, self.post, [WEIGHT, *hidden])
        last = rows.withColumn("__last", self._latest).where("__last = 1")
        if hidden not in self._outputs:
            columns = _typed([F.col(f"`{n}`") for n in self.plan.output_names], self.output)
            self._outputs[hidden] = [*columns, *[F.col(h) for h in hidden], _tag()]
        return last.select(*self._outputs[hidden])


def _typed(columns: list, output: StructType) -> list:
    """Cast to the batch result's types, so the sink's schema is exactly the query's."""
    return [col.cast(field.dataType).alias(field.name) for col, field in zip(columns, output.fields)]


def emitter_for(
    plan: StagePlan,
    state: AggregateState | None,
    multisets: ValueMultisets | None,
    output: StructType,
    operator,
    layout: RunLayout,
    sums: GroupSums | None = None,
    materialized: MaterializedRows | None = None,
) -> Emitter:
    if isinstance(operator, (SessionOperator, SessionsOnKeyedState)):
        return SessionEmitter(plan, operator, output)
    if operator is not None:
        return KeyedEmitter(plan, operator, output, layout, materialized)
    if state is not None:
        return AggregateEmitter(plan, state, multisets, output, sums)
    return ProjectionEmitter(plan, output, layout)
