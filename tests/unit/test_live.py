import pytest
from hypothesis import assume, given, settings, strategies as st

from jobs.changelog.kinds import RowKind
from jobs.changelog.live import LiveRows
from jobs.changelog.schema import parse_schema

SCHEMA = parse_schema("order_id BIGINT, pId BIGINT, income BIGINT", where="test")
I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


def keyed():
    return LiveRows(SCHEMA, ("order_id",))


def test_a_keyed_source_accepts_insert_update_delete_and_reinsert():
    live = keyed()
    steps = [(I, (1, 1, 5)), (UB, (1, 1, 5)), (UA, (1, 2, 6)), (D, (1, 2, 6)), (I, (1, 3, 7))]
    assert [live.apply(kind, row) for kind, row in steps] == [None] * 5
    assert len(live) == 1


@pytest.mark.parametrize("steps, message", [
    ([(D, (1, 1, 5))], "which was never inserted"),
    ([(UB, (1, 1, 5))], "which was never inserted"),
    ([(I, (1, 1, 5)), (I, (1, 1, 6))], "already present"),
    ([(I, (1, 1, 5)), (UA, (1, 1, 6))], "without a preceding -U"),
    ([(I, (1, 1, 5)), (D, (1, 1, 6))], "does not match its live row"),
    ([(I, (None, 1, 5))], "null column"),
])
def test_a_keyed_source_rejects_changes_that_break_the_key(steps, message):
    live = keyed()
    *before, last = steps
    for kind, row in before:
        assert live.apply(kind, row) is None
    reason = live.apply(*last)
    assert reason is not None and message in reason


def test_a_rejected_change_leaves_the_state_as_it_was():
    live = keyed()
    live.apply(I, (1, 1, 5))
    assert live.apply(D, (1, 1, 99)) is not None
    assert live.apply(D, (1, 1, 5)) is None


def test_a_multiset_retracts_one_copy_at_a_time():
    live = LiveRows(SCHEMA, ())
    assert live.apply(I, (1, 1, 5)) is None
    assert live.apply(I, (1, 1, 5)) is None
    assert live.apply(D, (1, 1, 5)) is None
    assert live.apply(D, (1, 1, 5)) is None
    assert "no live copy" in live.apply(D, (1, 1, 5))


@pytest.mark.parametrize("key", [("order_id",), ()])
def test_saved_state_continues_where_it_left_off(tmp_path, key):
    live = LiveRows(SCHEMA, key)
    live.apply(I, (1, 1, 5))
    live.apply(I, (2, None, 6))
    live.save(tmp_path / "live.parquet")
    restored = LiveRows(SCHEMA, key)
    restored.load(tmp_path / "live.parquet")
    assert restored.apply(D, (2, None, 6)) is None
    assert restored.apply(D, (2, None, 6)) is not None
    assert restored.apply(UB, (1, 1, 5)) is None


@st.composite
def valid_keyed_changelog(draw):
    """A random valid changelog over a few keys: every retraction retracts the live image."""
    live, steps = {}, []
    for _ in range(draw(st.integers(1, 40))):
        key = draw(st.integers(0, 4))
        value = draw(st.integers(0, 3))
        if key not in live:
            steps.append((I, (key, value, value)))
            live[key] = (key, value, value)
        elif draw(st.booleans()):
            steps += [(UB, live[key]), (UA, (key, value, value + 1))]
            live[key] = (key, value, value + 1)
        else:
            steps.append((D, live.pop(key)))
    return steps


@settings(max_examples=200)
@given(valid_keyed_changelog())
def test_every_valid_keyed_changelog_is_accepted(steps):
    live = keyed()
    assert [live.apply(kind, row) for kind, row in steps] == [None] * len(steps)


@settings(max_examples=200)
@given(valid_keyed_changelog(), st.data())
def test_dropping_an_insert_makes_the_next_retraction_of_that_key_invalid(steps, data):
    inserts = [i for i, (kind, _) in enumerate(steps) if kind is I]
    drop = data.draw(st.sampled_from(inserts))
    key = steps[drop][1][0]
    following = [kind for kind, row in steps[drop + 1:] if row[0] == key]
    assume(following and following[0] in (UB, D))
    live = keyed()
    reasons = [live.apply(kind, row) for i, (kind, row) in enumerate(steps) if i != drop]
    assert any(r is not None for r in reasons)
