"""A deduplication's or Top-N's ranking on the driver (jobs/stream/operators/deduplicate/top_rows.py) must keep the rows
Spark's ROW_NUMBER() window keeps, with the same row numbers, types and weights, or the stream
would write other rows than the batch job; and it must leave to Spark what Arrow does not order
as Spark does (NaN, nested values)."""

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT
from jobs.plan.nodes import Deduplicate
from jobs.runtime.arrow_frames import frame_of
from jobs.stream.operators.deduplicate.ranked_rows import TopRows
from jobs.stream.operators.deduplicate.top_rows import ranks_on_driver, top_rows
from jobs.stream.state.row_counts import difference, live_rows
from tests.strategies import examples

COLUMNS = ("k", "h", "o", "s", "d", "t", "x")
SCHEMA = pa.schema(
    [
        ("k", pa.string()),
        ("h", pa.int64()),
        ("o", pa.int64()),
        ("s", pa.string()),
        ("d", pa.decimal128(6, 2)),
        ("t", pa.timestamp("us", tz="UTC")),
        ("x", pa.float64()),
        (COUNT, pa.int64()),
    ]
)
VALUES = {
    "k": [None, "a", "é"],
    "h": [None, 1, 2],
    "o": [None, -1, 0, 7],
    "s": [None, "", "a", "B", "é", "ab"],
    "d": [None, Decimal("-1.50"), Decimal("9.99")],
    "t": [None, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)],
    "x": [None, -2.5, 0.0, 1e-3],
}


@st.composite
def live(draw) -> pa.Table:
    """Live rows (distinct, counts above zero), the way the keyed state holds them."""
    rows = [
        {**{c: draw(st.sampled_from(VALUES[c])) for c in COLUMNS}, COUNT: draw(st.integers(-1, 3))}
        for _ in range(draw(st.integers(0, 12)))
    ]
    return live_rows(pa.Table.from_pylist(rows, schema=SCHEMA))


NODES = st.builds(
    lambda keys, order_col, keep, limit, keep_all: Deduplicate(
        SimpleNamespace(output_names=COLUMNS),
        keys,
        order_col,
        keep,
        "rn",
        limit,
        None if keep_all else tuple(c for c in COLUMNS if c != "x"),
    ),
    st.sampled_from([("k",), ("k", "h"), ()]),
    st.sampled_from(["o", "s", "t", "d", "x"]),
    st.sampled_from(["first", "last"]),
    st.sampled_from([1, 2, 3]),
    st.booleans(),
)


def _multiset(rows: list[dict]) -> list:
    return sorted((tuple(sorted(r.items(), key=lambda kv: kv[0])) for r in rows), key=repr)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(node=NODES, before=live(), after=live())
def test_the_driver_ranks_what_spark_ranks(spark, node, before, after):
    assert ranks_on_driver(node, before, after)
    on_driver = frame_of(spark, difference(top_rows(after, node), top_rows(before, node)))
    in_spark = TopRows(node).difference(frame_of(spark, after), frame_of(spark, before))
    assert [(f.name, f.dataType) for f in on_driver.schema] == [(f.name, f.dataType) for f in in_spark.schema]
    assert _multiset([r.asDict() for r in on_driver.collect()]) == _multiset([r.asDict() for r in in_spark.collect()])


def test_nan_and_nested_values_are_ranked_by_spark():
    node = Deduplicate(SimpleNamespace(output_names=COLUMNS), ("k",), "x", "first", "rn")
    plain = pa.Table.from_pylist([{"k": "a", "x": 1.0, COUNT: 1}], schema=SCHEMA)
    with_nan = pa.Table.from_pylist([{"k": "a", "x": float("nan"), COUNT: 1}], schema=SCHEMA)
    assert ranks_on_driver(node, plain)
    assert not ranks_on_driver(node, plain, with_nan)
    nested = plain.set_column(plain.schema.get_field_index("s"), "s", pa.array([["a"]]))
    assert not ranks_on_driver(node, nested)
