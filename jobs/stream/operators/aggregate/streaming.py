"""A group aggregate over a changelog, incrementally, on Spark's own streaming aggregation.

Every input row carries a weight w (+1 or -1). Per group, Spark's stateful aggregation (update
output mode) keeps:
    __count = SUM(w)                        the group's live rows; 0 means delete the group
    __n<j>  = SUM(x IS NULL ? 0 : w)        COUNT(x), and the non-null count behind SUM/AVG
    __s<j>  = SUM(w > 0 ? x : -x)           SUM(x); AVG(x) = __s / __n
That covers SUM, COUNT and AVG: a retraction is a subtraction. MIN, MAX and DISTINCT aggregates
are not invertible: for those, each row is also emitted into a "slot" keyed by (group, slot,
value), so Spark counts every live value; the counts also go to the value multisets, a keyed
state (see multiset.py), from which the touched groups' results are recomputed in each micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, IntegerType

from jobs.changelog.columns import COUNT, SLOT, WEIGHT
from jobs.plan.nodes import AggCall, GroupAggregate
from jobs.stream.operators.calc import null_safe_equal


@dataclass(frozen=True)
class AggregateState:
    """Names and types of the state columns for one GroupAggregate."""

    node: GroupAggregate
    arg_types: dict[str, DataType]  # the input type of each aggregate argument

    @classmethod
    def of(cls, node: GroupAggregate, input_df: DataFrame) -> AggregateState:
        args = {c.arg for c in node.aggregates if c.arg is not None}
        return cls(node, {a: input_df.schema[a].dataType for a in sorted(args)})

    @property
    def keys(self) -> tuple[str, ...]:
        return self.node.group_keys

    @property
    def multiset_calls(self) -> list[tuple[int, AggCall]]:
        return [(j, c) for j, c in enumerate(self.node.aggregates) if not c.invertible]

    @property
    def value_columns(self) -> list[str]:
        return [value_column(j) for j, _ in self.multiset_calls]

    @property
    def has_slots(self) -> bool:
        return bool(self.multiset_calls)

    @property
    def slot_key(self) -> tuple[str, ...]:
        """The key of a row in the value-multiset table."""
        return self.keys + (SLOT, *self.value_columns)

    @property
    def state_key(self) -> tuple[str, ...]:
        """The key of a row of the aggregation state: the group, and the value slot if any."""
        return self.slot_key if self.has_slots else self.keys

    def contributions(self) -> list[tuple[str, Column, DataType]]:
        """Per input row: (state column, its value for this row, its type)."""
        w = F.col(WEIGHT)
        out: list[tuple[str, Column, DataType]] = []
        for name, kind, arg in state_columns(self.node):
            x = F.col(arg)
            if kind == "nonnull":
                out.append((name, F.when(x.isNull(), F.lit(0)).otherwise(w), IntegerType()))
            else:
                out.append((name, F.when(w > 0, x).otherwise(-x), self.arg_types[arg]))
        return out


def state_columns(node: GroupAggregate) -> list[tuple[str, str, str]]:
    """The invertible state beside __count, in order: (column, "nonnull" | "sum", argument)."""
    out = []
    for j, call in enumerate(node.aggregates):
        if not call.invertible or call.arg is None:
            continue
        out.append((nonnull_column(j), "nonnull", call.arg))
        if call.func in ("SUM", "AVG"):
            out.append((sum_column(j), "sum", call.arg))
    return out


def state_value_names(node: GroupAggregate) -> list[str]:
    """Names of the aggregation buffer's fields as Spark stores them (it names them all "sum")."""
    return [COUNT] + [name for name, _, _ in state_columns(node)]


def value_column(j: int) -> str:
    return f"__v{j}"


def nonnull_column(j: int) -> str:
    return f"__n{j}"


def sum_column(j: int) -> str:
    return f"__s{j}"


def streaming_aggregate(df: DataFrame, state: AggregateState) -> DataFrame:
    """The stateful part: per-group (and per-slot) sums of weights and weighted values."""
    keys = [F.col(k) for k in state.keys]
    contributions = state.contributions()
    sums = [F.sum(WEIGHT).alias(COUNT)] + [F.sum(name).alias(name) for name, _, _ in contributions]
    if not state.has_slots:
        rows = df.select(*keys, F.col(WEIGHT), *[value.alias(name) for name, value, _ in contributions])
        return rows.groupBy(*keys).agg(*sums)
    slots = F.array(*[_slot(state, slot) for slot in range(len(state.multiset_calls) + 1)])
    exploded = (
        df.select(*keys, F.col(WEIGHT), F.explode(slots).alias("__e"))
        .where(F.col("__e").isNotNull())
        .select(*keys, F.col(WEIGHT), "__e.*")
    )
    group = [*keys, F.col(SLOT), *[F.col(v) for v in state.value_columns]]
    return exploded.groupBy(*group).agg(*sums)


def _slot(state: AggregateState, slot: int) -> Column:
    """Slot 0 carries the invertible contributions; slot i the value of the i-th multiset
    aggregate (NULL values are left out: aggregates ignore them). Every slot has one shape."""

    def null(dtype: DataType) -> Column:
        return F.lit(None).cast(dtype)

    values = []
    for i, (j, call) in enumerate(state.multiset_calls, start=1):
        arg = _argument(call)
        value = F.col(arg) if i == slot else null(state.arg_types[arg])
        values.append(value.alias(value_column(j)))
    contributions = [(value if slot == 0 else null(dtype)).alias(name) for name, value, dtype in state.contributions()]
    struct = F.struct(F.lit(slot).alias(SLOT), *values, *contributions)
    if slot == 0:
        return struct
    return F.when(F.col(_argument(state.multiset_calls[slot - 1][1])).isNotNull(), struct)


def _argument(call: AggCall) -> str:
    """A multiset aggregate's argument column: only COUNT(*) has none, and it is invertible."""
    assert call.arg is not None
    return call.arg


def finalize(
    updated: DataFrame, state: AggregateState, recomputed: DataFrame | None, results: list[Column]
) -> DataFrame:
    """Touched groups with their aggregate results (named as the plan names them) and __count.

    `recomputed` holds the touched groups' non-invertible aggregates (recompute(), or
    multiset.py's own on the driver); `results` are result_columns(state), built once per query.
    """
    main = updated.where(F.col(SLOT) == 0) if state.has_slots else updated
    main = main.alias("m")
    if recomputed is not None:
        main = main.join(recomputed.alias("v"), null_safe_equal("m", "v", state.keys), "left")
    return main.select(*results)


def result_columns(state: AggregateState) -> list[Column]:
    """finalize's output columns. Built once and reused by every micro-batch: each Column is a
    round trip to the JVM, and the per-micro-batch cost is what a small change pays."""
    results = [_result(j, call, state) for j, call in enumerate(state.node.aggregates)]
    return [*[F.col(f"m.{k}").alias(k) for k in state.keys], *results, F.col(f"m.{COUNT}").alias(COUNT)]


def recompute(values: DataFrame, state: AggregateState) -> DataFrame:
    """Per group, the non-invertible aggregates over its live values (the value-multiset rows)."""
    funcs = {"MIN": F.min, "MAX": F.max, "COUNT": F.count, "SUM": F.sum, "AVG": F.avg}
    results = [funcs[c.func](F.col(value_column(j))).alias(c.name) for j, c in state.multiset_calls]
    return values.groupBy(*[F.col(k) for k in state.keys]).agg(*results)


def _result(j: int, call: AggCall, state: AggregateState) -> Column:
    if not call.invertible:
        value = F.col(f"v.{call.name}")
        return (F.coalesce(value, F.lit(0)) if call.func == "COUNT" else value).alias(call.name)
    if call.arg is None:
        return F.col(f"m.{COUNT}").alias(call.name)
    n = F.col(f"m.{nonnull_column(j)}")
    if call.func == "COUNT":
        return n.alias(call.name)
    total = F.col(f"m.{sum_column(j)}")
    if call.func == "SUM":
        return F.when(n > 0, total).alias(call.name)
    return F.when(n > 0, _average(total, n, state.arg_types[call.arg])).alias(call.name)


def _average(total: Column, n: Column, arg_type: DataType) -> Column:
    """AVG as Spark computes it: sum / count, decimals divided by DECIMAL(20,0) and cast to
    DECIMAL(p+4, s+4) of the input type, everything else in DOUBLE."""
    if isinstance(arg_type, DecimalType):
        result = DecimalType(min(38, arg_type.precision + 4), min(38, arg_type.scale + 4))
        return (total / n.cast(DecimalType(20, 0))).cast(result)
    return total.cast("double") / n.cast("double")
