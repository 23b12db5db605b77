"""A join computed on the driver (jobs/stream/operators/join/join_rows.py) must give the difference Spark's join
gives on the same live rows, column types included: inner, outer, semi and anti joins, null keys
(which match nothing), binary keys, rows with several copies; and it must leave
to Spark the joins Arrow does not compute as Spark does."""

from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT
from jobs.plan.nodes import Join
from jobs.runtime.arrow_frames import frame_of
from jobs.stream.operators.join.join_rows import joined, joins_on_driver
from jobs.stream.operators.join.joined_rows import JoinedRows
from jobs.stream.state.row_counts import difference, live_rows

LEFT = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.float64()), ("b", pa.binary()), (COUNT, pa.int64())])
RIGHT = pa.schema(
    [("rk", pa.string()), ("rid", pa.int64()), ("w", pa.string()), ("rb", pa.binary()), (COUNT, pa.int64())]
)
VALUES = {
    "id": [None, 1, 2],
    "k": [None, "a", "é"],
    "v": [None, 0.5, -1.0],
    "w": [None, "x", "y"],
    "rid": [None, 1, 2],
    "rk": [None, "a", "é"],
    "b": [None, b"a", b"\xff"],
    "rb": [None, b"a", b"\xff"],
}


@st.composite
def live(draw, schema: pa.Schema) -> pa.Table:
    rows = [
        {
            **{f.name: draw(st.sampled_from(VALUES[f.name])) for f in schema if f.name != COUNT},
            COUNT: draw(st.integers(-1, 3)),
        }
        for _ in range(draw(st.integers(0, 8)))
    ]
    return live_rows(pa.Table.from_pylist(rows, schema=schema))


def _node(kind: str, keys: tuple[tuple[str, ...], tuple[str, ...]]) -> Join:
    # The planner renames a right column that clashes with a left one below the join.
    left, right = (
        SimpleNamespace(output_names=("id", "k", "v", "b")),
        SimpleNamespace(output_names=("rk", "rid", "w", "rb")),
    )
    output = ("id", "k", "v", "b") if kind in ("semi", "anti") else ("id", "k", "v", "b", "rk", "rid", "w", "rb")
    return Join(left, right, kind, keys[0], keys[1], output)


NODES = st.builds(
    _node,
    st.sampled_from(["inner", "left", "right", "full", "semi", "anti"]),
    st.sampled_from([(("k",), ("rk",)), (("id", "k"), ("rid", "rk")), (("b",), ("rb",))]),
)


def _multiset(rows: list[dict]) -> list:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=NODES, left_before=live(LEFT), left_after=live(LEFT), right_before=live(RIGHT), right_after=live(RIGHT))
def test_the_driver_joins_what_spark_joins(spark, node, left_before, left_after, right_before, right_after):
    assert joins_on_driver(node, LEFT, RIGHT)
    on_driver = frame_of(
        spark, difference(joined(node, left_after, right_after), joined(node, left_before, right_before))
    )
    in_spark = JoinedRows(node).difference(
        (frame_of(spark, left_after), frame_of(spark, right_after)),
        (frame_of(spark, left_before), frame_of(spark, right_before)),
    )
    assert [(f.name, f.dataType) for f in on_driver.schema] == [(f.name, f.dataType) for f in in_spark.schema]
    assert _multiset([r.asDict() for r in on_driver.collect()]) == _multiset([r.asDict() for r in in_spark.collect()])


def test_joins_arrow_does_not_do_as_spark_stay_in_spark():
    inner = _node("inner", (("k",), ("rk",)))
    assert joins_on_driver(inner, LEFT, RIGHT)
    narrower = RIGHT.set(RIGHT.get_field_index("rid"), pa.field("rid", pa.int32()))
    assert not joins_on_driver(_node("inner", (("id",), ("rid",))), LEFT, narrower)  # Spark would cast one side
    doubles = LEFT.set(LEFT.get_field_index("k"), pa.field("k", pa.float64()))
    assert not joins_on_driver(inner, doubles, RIGHT.set(0, pa.field("rk", pa.float64())))
    conditioned = Join(inner.left, inner.right, "inner", ("k",), ("rk",), inner.output, condition=object())
    assert not joins_on_driver(conditioned, LEFT, RIGHT)
