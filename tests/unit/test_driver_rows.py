"""A difference finished on the driver (jobs/stream/operators/driver_rows.py): per sink key one row, the
addition over a retraction, as ChangeRows does in Spark, or the upsert materializer's input (each
row once per unit of weight, retractions first); only SELECTs that pick columns, and only columns
already of the sink's types, are finished there."""

from collections import Counter

import pyarrow as pa
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.changelog.columns import DELETE, OP, UPSERT, WEIGHT
from jobs.plan.nodes import Calc
from jobs.stream.operators.driver_rows import copies_in_order, picked_columns, upsert_rows

OUTPUT = StructType([StructField("id", LongType()), StructField("name", StringType())])


def _calc(select: str, where: str | None = None) -> Calc:
    parsed = sqlglot.parse_one(f"SELECT {select} FROM t" + (f" WHERE {where}" if where else ""), read="spark")
    projections = tuple((e.alias_or_name, e.unalias()) for e in parsed.expressions)
    return Calc(None, projections, parsed.args["where"].this if where else None)


CHANGES = st.lists(
    st.tuples(st.sampled_from([None, 1, 2, 3]), st.sampled_from(["a", "b", None]), st.sampled_from([-2, -1, 1, 2])),
    max_size=12,
)


@given(changes=CHANGES)
def test_each_key_gets_its_addition_else_a_delete(changes):
    rows = pa.table(
        {
            "k": pa.array([c[0] for c in changes], pa.int64()),
            "n": pa.array([c[1] for c in changes], pa.string()),
            WEIGHT: pa.array([c[2] for c in changes], pa.int32()),
        }
    )
    out = upsert_rows(rows, ["k", "n"], OUTPUT, ("id",)).to_pylist()
    assert sorted(r["id"] is None and -1 or r["id"] for r in out) == sorted(
        {c[0] is None and -1 or c[0] for c in changes}
    )
    for r in out:
        mine = [c for c in changes if c[0] == r["id"]]
        added = [c for c in mine if c[2] > 0]
        assert r[OP] == (UPSERT if added else DELETE)
        assert (r["id"], r["name"]) in [(c[0], c[1]) for c in (added or mine)]


@given(changes=CHANGES)
def test_the_materializer_gets_one_copy_per_unit_of_weight_retractions_first(changes):
    rows = pa.table(
        {
            "k": pa.array([c[0] for c in changes], pa.int64()),
            "n": pa.array([c[1] for c in changes], pa.string()),
            WEIGHT: pa.array([c[2] for c in changes], pa.int32()),
        }
    )
    out = copies_in_order(rows, ["k", "n"], OUTPUT)
    assert out.column_names == ["id", "name", WEIGHT] and out.schema.field(WEIGHT).type == pa.int32()
    signs = out.column(WEIGHT).to_pylist()
    assert signs == sorted(signs) and set(signs) <= {-1, 1}
    expected = Counter()
    for k, n, w in changes:
        expected[(k, n, 1 if w > 0 else -1)] += abs(w)
    assert Counter((r["id"], r["name"], r[WEIGHT]) for r in out.to_pylist()) == expected
    added = [(c[0], c[1]) for c in changes if c[2] > 0 for _ in range(c[2])]
    assert [(r["id"], r["name"]) for r in out.to_pylist() if r[WEIGHT] > 0] == added  # the rows' own order


def test_a_select_that_computes_or_filters_or_casts_goes_to_spark():
    rows = pa.table(
        {"k": pa.array([1], pa.int64()), "n": ["a"], "m": pa.array([1], pa.int32()), WEIGHT: pa.array([1], pa.int32())}
    )
    assert picked_columns(rows, _calc("k AS id, n AS name"), ("id", "name")) == ["k", "n"]
    assert picked_columns(rows, None, ("k", "n")) == ["k", "n"]
    assert picked_columns(rows, _calc("k + 1 AS id, n AS name"), ("id", "name")) is None
    assert picked_columns(rows, _calc("k AS id, n AS name", "k > 0"), ("id", "name")) is None
    assert picked_columns(rows, _calc("t.k AS id, n AS name"), ("id", "name")) is None
    assert upsert_rows(rows, ["m", "n"], OUTPUT, ("id",)) is None  # INT where the sink has BIGINT
    assert copies_in_order(rows, ["m", "n"], OUTPUT) is None
