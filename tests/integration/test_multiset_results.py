"""MIN / MAX / COUNT(DISTINCT) recomputed on the driver (jobs/stream/operators/aggregate/multiset.py) must be what
Spark's aggregation computes over the same live values, column types included, or the stream
would write other results than the batch job; and the driver takes only what it computes
exactly (no floating MIN / MAX: Arrow skips NaN, Spark orders it above every number)."""

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT, SLOT
from jobs.plan.nodes import AggCall
from jobs.stream.operators.aggregate.multiset import driver_results, exact_on_driver
from jobs.stream.operators.aggregate.streaming import AggregateState, recompute, value_column
from tests.strategies import examples

CALLS = [
    AggCall("MIN", "s", False, "lo"),
    AggCall("MAX", "m", False, "hi"),
    AggCall("COUNT", "t", True, "n"),
    AggCall("MAX", "t", False, "latest"),
]
STATE = AggregateState(
    SimpleNamespace(group_keys=("g", "h"), aggregates=CALLS, is_global=False),
    {"s": pa.string(), "m": pa.decimal128(6, 2), "t": pa.timestamp("us", tz="UTC")},
)
SCHEMA = pa.schema(
    [
        ("g", pa.string()),
        ("h", pa.int64()),
        (SLOT, pa.int32()),
        (value_column(0), pa.string()),
        (value_column(1), pa.decimal128(6, 2)),
        (value_column(2), pa.timestamp("us", tz="UTC")),
        (value_column(3), pa.timestamp("us", tz="UTC")),
        (COUNT, pa.int64()),
    ]
)
VALUES = [
    st.sampled_from(["", "a", "B", "é", "ab"]),
    st.sampled_from([Decimal("-1.50"), Decimal("0.00"), Decimal("9.99")]),
    st.sampled_from([datetime(2026, 1, d, tzinfo=UTC) for d in (1, 2, 3)]),
]


@st.composite
def live_values(draw) -> pa.Table:
    rows = []
    for _ in range(draw(st.integers(0, 14))):
        slot = draw(st.integers(1, 4))
        row = {
            "g": draw(st.sampled_from([None, "x", "y"])),
            "h": draw(st.sampled_from([None, 1])),
            SLOT: slot,
            COUNT: draw(st.integers(1, 3)),
        }
        for j in range(4):
            row[value_column(j)] = draw(VALUES[min(j, 2)]) if j == slot - 1 else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _by_group(rows: list[dict]) -> dict:
    return {(r["g"], r["h"]): {c.name: r[c.name] for c in CALLS} for r in rows}


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(after=live_values())
def test_the_driver_recomputes_what_spark_recomputes(spark, after):
    assert exact_on_driver(STATE, after.schema)
    on_driver = spark.createDataFrame(driver_results(after, STATE))
    in_spark = recompute(spark.createDataFrame(after), STATE)
    # Types, not nullability: Spark's COUNT is never null, and the join in finalize makes every
    # recomputed column nullable anyway.
    assert [(f.name, f.dataType) for f in on_driver.schema] == [(f.name, f.dataType) for f in in_spark.schema]
    assert _by_group([r.asDict() for r in on_driver.collect()]) == _by_group([r.asDict() for r in in_spark.collect()])


def test_floating_min_and_max_sums_and_global_aggregates_stay_in_spark():
    floats = SCHEMA.set(SCHEMA.get_field_index(value_column(1)), pa.field(value_column(1), pa.float64()))
    assert not exact_on_driver(STATE, floats)
    summed = AggregateState(
        SimpleNamespace(group_keys=("g",), aggregates=[AggCall("SUM", "m", True, "t")], is_global=False),
        {"m": pa.int64()},
    )
    assert not exact_on_driver(summed, SCHEMA)
    whole = AggregateState(SimpleNamespace(group_keys=(), aggregates=CALLS, is_global=True), STATE.arg_types)
    assert not exact_on_driver(whole, SCHEMA)
