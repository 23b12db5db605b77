import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import KIND
from jobs.changelog.kinds import RowKind
from jobs.changelog.live import LiveRows
from jobs.changelog.live_parts import key_hashes
from jobs.changelog.live_rowwise import RowByRow
from jobs.changelog.schema import parse_schema

SCHEMA = parse_schema("order_id BIGINT, pId BIGINT, income BIGINT", where="test")
I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE  # noqa: E741 (Flink's names)


def keyed():
    return RowByRow(SCHEMA, ("order_id",))


def test_a_keyed_source_accepts_insert_update_delete_and_reinsert():
    live = keyed()
    steps = [(I, (1, 1, 5)), (UB, (1, 1, 5)), (UA, (1, 2, 6)), (D, (1, 2, 6)), (I, (1, 3, 7))]
    assert [live.apply(kind, row) for kind, row in steps] == [None] * 5
    assert len(live) == 1


@pytest.mark.parametrize(
    "steps, message",
    [
        ([(D, (1, 1, 5))], "which was never inserted"),
        ([(UB, (1, 1, 5))], "which was never inserted"),
        ([(I, (1, 1, 5)), (I, (1, 1, 6))], "already present"),
        ([(I, (1, 1, 5)), (UA, (1, 1, 6))], "without a preceding -U"),
        ([(I, (1, 1, 5)), (D, (1, 1, 6))], "does not match its live row"),
        ([(I, (None, 1, 5))], "null column"),
    ],
)
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
    live = RowByRow(SCHEMA, ())
    assert live.apply(I, (1, 1, 5)) is None
    assert live.apply(I, (1, 1, 5)) is None
    assert live.apply(D, (1, 1, 5)) is None
    assert live.apply(D, (1, 1, 5)) is None
    assert "no live copy" in live.apply(D, (1, 1, 5))


def changes(steps) -> pa.Table:
    """The changes as staging hands them to LiveRows.check: the schema's columns and the kind."""
    columns = list(zip(*(row for _, row in steps))) or [[] for _ in SCHEMA.names]
    table = pa.table({c.name: pa.array(values, c.arrow_type) for c, values in zip(SCHEMA.columns, columns)})
    return table.append_column(KIND, pa.array([int(kind) for kind, _ in steps], pa.int8()))


@pytest.mark.parametrize("key", [("order_id",), ()])
def test_saved_state_continues_where_it_left_off(tmp_path, key):
    live = LiveRows(SCHEMA, key)
    assert live.check(changes([(I, (1, 1, 5)), (I, (2, None, 6))])) == []
    saved = live.save(tmp_path / "live")
    assert saved == tmp_path / "live.parquet"  # a state of a part is one file
    restored = LiveRows(SCHEMA, key)
    restored.load(saved)
    assert restored.check(changes([(D, (2, None, 6))])) == []
    assert [i for i, _ in restored.check(changes([(D, (2, None, 6)), (UB, (1, 1, 5))]))] == [0]


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
    following = [kind for kind, row in steps[drop + 1 :] if row[0] == key]
    assume(following and following[0] in (UB, D))
    live = keyed()
    reasons = [live.apply(kind, row) for i, (kind, row) in enumerate(steps) if i != drop]
    assert any(r is not None for r in reasons)


# The columnar check must give the row-by-row answer: the same state after every file and, when a
# file breaks the protocol, the same offending rows with the same reasons. Few keys and values, so
# that random changes often collide with live rows, nulls included.
_VALUES = st.sampled_from([0, 1, 2, None])
_CHANGE = st.tuples(st.sampled_from(list(RowKind)), st.tuples(_VALUES, _VALUES, _VALUES))


@st.composite
def changelog_files(draw, key: tuple[str, ...]):
    """Files of changes drawn against the live rows so far: most files valid (the columnar path),
    some with one invalid change (the row-by-row path; one, so that no other change gives the
    columnar check away)."""
    mirror, files = RowByRow(SCHEMA, key), []
    for _ in range(draw(st.integers(1, 4))):
        spoilt, steps = draw(st.integers(0, 2)) == 0, []
        for _ in range(draw(st.integers(0, 25))):
            kind, row = draw(_CHANGE)
            live = list(mirror._live.values() if key else mirror._live)
            if live and kind.is_retraction and draw(st.integers(0, 3)):
                row = draw(st.sampled_from(live))  # usually retract what is there,
                if draw(st.integers(0, 3)) == 0:  # sometimes with another image
                    row = row[:2] + (draw(_VALUES),)
            if mirror.apply(kind, row) is None:
                steps.append((kind, row))
            elif spoilt and draw(st.integers(0, 2)) == 0:
                steps.append((kind, row))
                spoilt = False
        files.append(steps)
    return files


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([("order_id",), ("order_id", "pId"), ()]).flatmap(
        lambda key: st.tuples(st.just(key), changelog_files(key))
    ),
    st.booleans(),
)
def test_the_columnar_check_agrees_with_the_row_by_row_protocol(key_and_files, keep):
    key, files = key_and_files
    columnar, one_by_one = LiveRows(SCHEMA, key), RowByRow(SCHEMA, key)
    for steps in files:
        before = _state(one_by_one.table())
        invalid = one_by_one.check(changes(steps), keep=keep)
        if steps and not invalid:  # a valid file is never replayed row by row: that is the point
            assert columnar._columnar_after(columnar.table(), changes(steps)) is not None, (before, steps)
        assert columnar.check(changes(steps), keep=keep) == invalid
        assert _state(columnar.table()) == _state(one_by_one.table())


# The same with the state split into parts of a row or two: each part checked on its own must
# give the whole state's answer, and the parts together must hold its rows.
@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([("order_id",), ("order_id", "pId"), ()]).flatmap(
        lambda key: st.tuples(st.just(key), changelog_files(key))
    ),
    st.booleans(),
    st.sampled_from([1, 2]),
)
def test_a_state_split_into_parts_agrees_with_the_row_by_row_protocol(key_and_files, keep, part_rows):
    key, files = key_and_files
    one_by_one = RowByRow(SCHEMA, key)
    with tempfile.TemporaryDirectory() as spill:
        split = LiveRows(SCHEMA, key, spill=Path(spill), part_rows=part_rows)
        for steps in files:
            assert split.check(changes(steps), keep=keep) == one_by_one.check(changes(steps), keep=keep)
            assert _state(split.table()) == _state(one_by_one.table())


def test_a_split_state_saves_as_a_folder_of_parts_and_a_later_run_continues_from_it(tmp_path):
    first = LiveRows(SCHEMA, ("order_id",), spill=tmp_path / "spill-1", part_rows=2)
    assert first.check(changes([(I, (n, n % 3, 5)) for n in range(10)])) == []
    saved = first.save(tmp_path / "live-000001")
    assert saved.is_dir() and len(list(saved.glob("part-*.parquet"))) == 8  # 10 rows, 2 per part
    committed = {path.name: path.read_bytes() for path in saved.iterdir()}
    later = LiveRows(SCHEMA, ("order_id",), spill=tmp_path / "spill-2", part_rows=2)
    later.load(saved)
    assert len(later) == 10
    found = later.check(changes([(D, (3, 0, 5)), (D, (3, 0, 5)), (I, (11, 1, 1)), (UB, (4, 9, 9))]))
    assert [i for i, _ in found] == [1, 3]  # the second delete of 3; a -U with another image
    assert {path.name: path.read_bytes() for path in saved.iterdir()} == committed  # until it commits
    assert sorted(r["order_id"] for r in later.table().to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 11]
    assert later.check(changes([(I, (n, 0, 0)) for n in range(30, 38)])) == []  # 18 rows: 16 parts
    (tmp_path / "live-000002").mkdir()  # what a crash before the manifest left: not read as parts
    (tmp_path / "live-000002" / "part-00099.parquet").write_bytes(b"stale")
    again = later.save(tmp_path / "live-000002")
    assert len(list(again.glob("part-*.parquet"))) == 16 and len(later) == 18
    assert {path.name: path.read_bytes() for path in saved.iterdir()} == committed  # linked, not moved
    in_memory = LiveRows(SCHEMA, ("order_id",))  # no spill folder: the parts read whole
    in_memory.load(saved)
    assert len(in_memory) == 10 and in_memory.check(changes([(D, (3, 0, 5))])) == []


def test_equal_keys_hash_alike_whatever_their_zero_sign_nan_payload_or_null():
    floats = pa.table({"x": pa.array([0.0, -0.0, float("nan"), np.frombuffer(b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]])})
    hashes = key_hashes(floats, ["x"])
    assert hashes[0] == hashes[1] and hashes[2] == hashes[3] and hashes[0] != hashes[2]
    mixed = pa.table(
        {"k": pa.array([1, None, 1]), "s": pa.array(["a", "b", "a"]), "b": pa.array([b"\xff", b"", b"\xff"])}
    )
    hashes = key_hashes(mixed, ["k", "s", "b"])
    assert hashes[0] == hashes[2] and hashes[0] != hashes[1]


def _state(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=repr)
