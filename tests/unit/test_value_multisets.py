"""The value multisets of MIN / MAX / DISTINCT aggregates (jobs/stream/operators/aggregate/multiset.py): Spark's new
counts laid over the touched groups' live values give the values after the micro-batch, and the
logged change is exactly what turns the one into the other, so that the keyed state read in the
next micro-batch holds what Spark's own counts say."""

import math
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT, SLOT
from jobs.errors import RunStateError
from jobs.stream.operators.aggregate.multiset import overlay, refuse_old_layout
from tests.strategies import examples

SCHEMA = pa.schema([("g", pa.string()), (SLOT, pa.int32()), ("v", pa.float64()), (COUNT, pa.int64())])
# Values as Spark groups them: -0.0 is 0.0, every NaN one value, a null group key a group.
VALUES = st.tuples(
    st.sampled_from([None, "a", "b"]), st.sampled_from([1, 2]), st.sampled_from([0.0, -0.0, 1.5, math.nan, 7.0])
)


NAN = math.nan  # one object, so that every NaN is one dictionary key


def _key(row: tuple) -> tuple:
    group, slot, value = row
    return group, slot, NAN if math.isnan(value) else value + 0.0


def _table(counts: dict) -> pa.Table:
    rows = list(counts.items())
    return pa.table(
        [
            pa.array([r[0][0] for r in rows], pa.string()),
            pa.array([r[0][1] for r in rows], pa.int32()),
            pa.array([r[0][2] for r in rows], pa.float64()),
            pa.array([r[1] for r in rows], pa.int64()),
        ],
        schema=SCHEMA,
    )


def _counts(table: pa.Table) -> Counter:
    out = Counter()
    for row in table.to_pylist():
        out[_key((row["g"], row[SLOT], row["v"]))] += row[COUNT]
    return out


@given(
    before=st.dictionaries(VALUES.map(_key), st.integers(1, 3), max_size=12),
    new=st.dictionaries(VALUES, st.integers(-1, 3), max_size=8),
)
@settings(max_examples=examples(60), deadline=None)
def test_new_counts_over_the_live_values_give_the_values_after_and_the_change_between(before, new):
    # Spark's update output names each value once, as its grouping normalises it.
    new = {_key(value): count for value, count in new.items()}
    after, change = overlay(_table(before), _table(new))
    expected = Counter({v: n for v, n in before.items() if v not in new})
    expected.update({v: n for v, n in new.items() if n > 0})
    assert _counts(after) == expected
    assert all(n > 0 for n in _counts(after).values())
    replayed = Counter(before)
    replayed.update(_counts(change))
    assert +replayed == expected
    assert 0 not in _counts(change).values()


def test_a_value_spark_names_differently_signed_or_payloaded_is_the_same_value():
    after, change = overlay(_table({("a", 1, 0.0): 2}), _table({("a", 1, -0.0): 3}))
    assert after.num_rows == 1 and after.column(COUNT).to_pylist() == [3]
    assert change.column(COUNT).to_pylist() == [1]


def test_a_run_folder_with_the_earlier_delta_table_is_refused_with_its_place(tmp_path):
    (tmp_path / "agg_values" / "_delta_log").mkdir(parents=True)
    with pytest.raises(RunStateError, match="rebuild") as raised:
        refuse_old_layout(tmp_path / "agg_values")
    assert str(tmp_path) in str(raised.value)
    refuse_old_layout(tmp_path / "elsewhere")  # a new folder goes on
