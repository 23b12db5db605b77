"""What one micro-batch does, for the two query shapes.

- A group aggregate: Spark's update output holds the new state of every touched group; it is
  finalised (SUM from its sums, AVG as a ratio, MIN/MAX recomputed from the value multisets),
  HAVING and the SELECT expressions are applied, and a group with no live rows left (or one that
  stops passing HAVING) becomes a delete.
- A projection: the rows that passed the filter; per sink key the last change in the micro-batch
  decides: an addition upserts its image, a retraction deletes the key.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.changelog.schema import SEQ, WEIGHT
from jobs.plan.nodes import Calc, GroupAggregate
from jobs.plan.planner import QueryPlan
from jobs.stream.aggregate import COUNT, AggregateState, finalize
from jobs.stream.calc import projections
from jobs.stream.multiset import ValueMultisets
from jobs.stream.sink import DELETE, OP, UPSERT


@dataclass(frozen=True)
class MicroBatch:
    id: int
    start: int  # changelog rows [start, end), summed over sources
    end: int
    watermark_after: int | None  # microseconds since the epoch, for sources with event time


class AggregateBatches:
    def __init__(self, plan: QueryPlan, state: AggregateState, multisets: ValueMultisets | None,
                 output: StructType):
        self.plan, self.state, self.multisets, self.output = plan, state, multisets, output
        above = plan.root.input
        self.post: Calc | None = above if isinstance(above, Calc) else None

    @property
    def reads_twice(self) -> bool:
        return self.multisets is not None

    def changes(self, spark: SparkSession, updated: DataFrame, batch: MicroBatch) -> pa.Table:
        return self.changed_groups(spark, updated, batch).toArrow()

    def after_sink_commit(self, batch: MicroBatch) -> None:
        pass

    def changed_groups(self, spark: SparkSession, updated: DataFrame, batch: MicroBatch,
                       hidden: tuple[str, ...] = ()) -> DataFrame:
        """The touched groups as output rows tagged upsert / delete (plus `hidden` state columns)."""
        values = None
        if self.multisets is not None:
            counts = updated.where(F.col("__slot") > 0).select(*self.state.slot_key, COUNT)
            self.multisets.apply(counts.toArrow(), batch.id)
            touched = updated.where(F.col("__slot") == 0).select(*self.state.keys)
            values = self.multisets.live_values(spark, touched)
        groups = finalize(updated, self.state, values)
        alive = F.lit(True) if self.state.node.is_global else F.col(COUNT) > 0
        if self.post is not None:
            if self.post.condition is not None:
                alive = alive & F.coalesce(F.expr(self.post.condition.sql("spark")), F.lit(False))
            columns = [value for _, value in projections(self.post)]
        else:
            columns = [F.col(n) for n in self.state.node.output_names]
        op = F.when(alive, F.lit(UPSERT)).otherwise(F.lit(DELETE)).alias(OP)
        return groups.select(*_typed(columns, self.output), *[F.col(h) for h in hidden], op)


class ProjectionBatches:
    reads_twice = False

    def __init__(self, plan: QueryPlan, output: StructType):
        self.plan, self.output = plan, output

    def after_sink_commit(self, batch: MicroBatch) -> None:
        pass

    def changes(self, spark: SparkSession, rows: DataFrame, batch: MicroBatch) -> pa.Table:
        key = [F.col(k) for k in self.plan.sink_key]
        latest = Window.partitionBy(*key).orderBy(F.col(SEQ).desc())
        last = rows.withColumn("__last", F.row_number().over(latest)).where("__last = 1")
        op = F.when(F.col(WEIGHT) > 0, F.lit(UPSERT)).otherwise(F.lit(DELETE)).alias(OP)
        columns = [F.col(n) for n in self.plan.output_names]
        return last.select(*_typed(columns, self.output), op).toArrow()


def _typed(columns: list, output: StructType) -> list:
    """Cast to the batch result's types, so the sink's schema is exactly the query's."""
    return [col.cast(field.dataType).alias(field.name) for col, field in zip(columns, output.fields)]


def batches_for(plan: QueryPlan, state: AggregateState | None, multisets, output: StructType):
    if isinstance(plan.aggregate, GroupAggregate):
        return AggregateBatches(plan, state, multisets, output)
    return ProjectionBatches(plan, output)
