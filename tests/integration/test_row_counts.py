"""A keyed operator sums its net changes and live rows on the driver (jobs/stream/state/row_counts.py):
the sums must be the ones Spark's aggregation computes on the same rows, or the stream would keep
a row the batch does not (a -0.0 and a 0.0 that cancel in Spark, say) and the two would drift."""

import math
import struct
from decimal import Decimal

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs.changelog.columns import COUNT
from jobs.stream.state.row_counts import live_rows, net_rows
from tests.strategies import examples

DDL = (
    f"k BIGINT, d DOUBLE, f FLOAT, s STRING, m DECIMAL(6,2), t TIMESTAMP, "
    f"a ARRAY<DOUBLE>, r STRUCT<x: DOUBLE, y: STRING>, `{COUNT}` BIGINT"
)
# A NaN whose payload differs from float('nan'): Arrow tells the two apart, Spark does not.
OTHER_NAN = struct.unpack("d", struct.pack("Q", 0x7FF8000000000001))[0]
DOUBLES = st.sampled_from([None, 0.0, -0.0, 1.5, math.nan, OTHER_NAN])
ROWS = st.fixed_dictionaries(
    {
        "k": st.sampled_from([None, 1, 2]),
        "d": DOUBLES,
        "f": st.sampled_from([None, 0.0, -0.0, math.nan, 2.5]),
        "s": st.sampled_from([None, "", "a"]),
        "m": st.sampled_from([None, Decimal("1.10"), Decimal("0.00")]),
        "t": st.sampled_from([None, 0, 1_700_000_000_000_000]),
        "a": st.sampled_from([None, [], [None], [0.0], [-0.0], [math.nan], [OTHER_NAN, 1.0]]),
        "r": st.sampled_from(
            [None, {"x": None, "y": None}, {"x": 0.0, "y": "a"}, {"x": -0.0, "y": "a"}, {"x": math.nan, "y": None}]
        ),
        COUNT: st.integers(-2, 2),
    }
)


def arrow_rows(rows: list[dict]) -> pa.Table:
    schema = pa.schema(
        [
            ("k", pa.int64()),
            ("d", pa.float64()),
            ("f", pa.float32()),
            ("s", pa.string()),
            ("m", pa.decimal128(6, 2)),
            ("t", pa.timestamp("us", tz="UTC")),
            ("a", pa.list_(pa.float64())),
            ("r", pa.struct([("x", pa.float64()), ("y", pa.string())])),
            (COUNT, pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def spark_sums(spark, table: pa.Table, live: bool) -> pa.Table:
    """The sums as Spark's aggregation computes them: the live rows (above zero) or the net
    changes (not zero)."""
    frame = spark.createDataFrame(table, DDL) if table.num_rows else spark.createDataFrame([], DDL)
    values = [F.col(c) for c in table.column_names if c != COUNT]
    kept = F.col(COUNT) > 0 if live else F.col(COUNT) != 0
    return frame.groupBy(*values).agg(F.sum(COUNT).alias(COUNT)).where(kept).toArrow()


def canonical(table: pa.Table) -> list:
    """The rows as sorted tuples of strings (NaN spelled out: it is not equal to itself; nested
    values spelled out too, so that a NULL and a struct compare)."""

    def value(v) -> str:
        if isinstance(v, float):
            return "NaN" if math.isnan(v) else repr(v + 0.0)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    return sorted(tuple(value(v) for v in row.values()) for row in table.to_pylist())


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(ROWS, max_size=12))
def test_driver_sums_equal_sparks(spark, rows):
    table = arrow_rows(rows)
    assert canonical(live_rows(table)) == canonical(spark_sums(spark, table, live=True))
    assert canonical(net_rows(table)) == canonical(spark_sums(spark, table, live=False))


def test_signed_zeros_and_nan_payloads_are_one_row_each(spark):
    table = arrow_rows(
        [
            {"k": 1, "d": -0.0, "f": None, "s": None, "m": None, "t": None, "a": None, "r": None, COUNT: 1},
            {"k": 1, "d": 0.0, "f": None, "s": None, "m": None, "t": None, "a": None, COUNT: 1, "r": None},
            {"k": 2, "d": math.nan, "f": None, "s": None, "m": None, "t": None, "a": [OTHER_NAN], "r": None, COUNT: 1},
            {"k": 2, "d": OTHER_NAN, "f": None, "s": None, "m": None, "t": None, "a": [math.nan], "r": None, COUNT: -1},
        ]
    )
    out = live_rows(table)
    assert out.num_rows == 1 and out.column(COUNT).to_pylist() == [2]
    assert math.copysign(1.0, out.column("d")[0].as_py()) == 1.0  # Spark outputs the group as 0.0
    assert out.schema == table.schema
