"""A keyed state's snapshot in parts of key ranges (jobs/stream/state/snapshot_parts.py): folded one
part at a time, it holds the live rows of the whole history; every part holds only keys of its
range; a part no log touches is kept as it was; a reader of touched keys opens only their parts."""

import math
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT
from jobs.stream.state.live_state import COMPACT_EVERY, LiveState
from jobs.stream.state.row_counts import live_rows
from jobs.stream.state.snapshot_parts import Snapshot, fold_parts, part_of

SCHEMA = pa.schema([("k", pa.float64()), ("s", pa.string()), ("v", pa.int64()), (COUNT, pa.int64())])
KEYS = ("k", "s")
# Few distinct keys, with the ones Spark folds together: -0.0 and 0.0, NaN, NULL.
KEY_VALUES = st.tuples(
    st.sampled_from([None, -0.0, 0.0, 1.5, -2.0, math.nan, 7.0, 1e9]), st.sampled_from([None, "", "a", "b"])
)


def _spark_key(row: tuple) -> tuple:
    """A key as Spark compares it: -0.0 is 0.0, every NaN one NaN ('nan' stands for it)."""
    k, s = row[:2]
    if k is not None and math.isnan(k):
        k = "nan"
    elif k is not None:
        k += 0.0
    return k, s


def _canonical(rows: list[tuple]) -> Counter:
    counts = Counter()
    for k, s, v, n in rows:
        counts[(*_spark_key((k, s)), v)] += n
    return Counter({row: n for row, n in counts.items() if n > 0})


def _table(rows: list[tuple]) -> pa.Table:
    return pa.table([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(SCHEMA)], schema=SCHEMA)


def _read(state: LiveState, batch_id: int, touched: pa.Table | None) -> Counter:
    found = state.rows_before(batch_id, touched, SCHEMA).to_pylist()
    return _canonical([(r["k"], r["s"], r["v"], r[COUNT]) for r in found])


def _assert_parts_hold_their_ranges(folder: Path) -> None:
    snapshot = Snapshot(folder, KEYS)
    bounds, parts = snapshot.bounds(), snapshot.parts()
    if bounds is None:
        return
    assert bounds.num_rows == len(parts)
    for i, (path,) in enumerate(parts):
        rows = pq.read_table(path)
        assert rows.num_rows > 0
        assert set(part_of(rows, bounds, KEYS).tolist()) == {i}, f"part {i} holds keys of another range"


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), part_rows=st.integers(1, 4), batches=st.integers(1, 3 * COMPACT_EVERY + 2))
def test_parts_folded_one_at_a_time_hold_the_live_rows_of_the_history(tmp_path_factory, data, part_rows, batches):
    """Random micro-batches (inserts, and retractions of live rows) over keys Spark folds together:
    read whole or by touched keys, the state is the live rows of the history; every part of every
    snapshot holds only keys of its range."""
    directory = tmp_path_factory.mktemp("state")
    state, live = LiveState(directory, KEYS, part_rows=part_rows), Counter()
    for batch_id in range(batches):
        assert _read(state, batch_id, None) == live
        inserts = data.draw(st.lists(st.tuples(KEY_VALUES, st.integers(0, 2), st.integers(1, 2)), max_size=10))
        changes = [(k, s, v, n) for (k, s), v, n in inserts]
        if live:
            retracted = data.draw(st.lists(st.sampled_from(sorted(live, key=repr)), max_size=4, unique=True))
            changes += [(*_stored(row), -live[row]) for row in retracted]
        touched = _table(changes).select(list(KEYS))
        wanted = {_spark_key(c) for c in changes}
        assert _read(state, batch_id, touched) == Counter({r: n for r, n in live.items() if r[:2] in wanted})
        state.record(_table(changes), batch_id)
        live = _canonical([(*_stored(r), n) for r, n in live.items()] + changes)
        for folder in directory.glob("snapshot-*"):
            _assert_parts_hold_their_ranges(folder)
    assert _read(state, batches, None) == live


def _stored(row: tuple) -> tuple:
    """A canonical row back in stored values."""
    k, s, v = row
    return (math.nan if k == "nan" else k), s, v


def _read_parts(files: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in files])


def _numbers(keys: range, count: int = 1) -> pa.Table:
    return pa.table({"k": pa.array(list(keys), pa.int64()), COUNT: pa.array([count] * len(keys), pa.int64())})


def test_a_fold_reads_one_part_at_a_time_and_keeps_untouched_parts_as_they_were(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    fold_parts(None, _numbers(range(100)), ("k",), live_rows, _read_parts, old, part_rows=10, carry=True)
    assert len(Snapshot(old, ("k",)).parts()) == 10
    asked, folded = [], []

    def reading(files):
        asked.append(files)
        return _read_parts(files)

    def folding(rows):
        folded.append(rows.num_rows)
        return live_rows(rows)

    logs = pa.concat_tables([_numbers(range(42, 45), -1), _numbers(range(200, 203))])
    fold_parts(Snapshot(old, ("k",)), logs, ("k",), folding, reading, new, part_rows=10, carry=True)
    assert all(len(files) == 1 for files in asked) and len(asked) == 2  # parts 4 and 9, one each
    assert max(folded) <= 10 + 3
    parts = [p for (p,) in Snapshot(new, ("k",)).parts()]
    old_inodes = {os.stat(p).st_ino: i for i, (p,) in enumerate(Snapshot(old, ("k",)).parts())}
    kept = sorted(old_inodes[n] for n in (os.stat(p).st_ino for p in parts) if n in old_inodes)
    assert kept == [0, 1, 2, 3, 5, 6, 7, 8]  # linked, not rewritten
    keys = sorted(k for p in parts for k in pq.read_table(p).column("k").to_pylist())
    assert keys == sorted(set(range(100)) - {42, 43, 44} | {200, 201, 202})


def test_a_fold_that_drops_rows_by_itself_folds_every_part(tmp_path):
    """A state TTL forgets groups nobody touched: no part is kept as it was."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    fold_parts(None, _numbers(range(30)), ("k",), live_rows, _read_parts, old, part_rows=10, carry=True)
    dropping_evens = lambda rows: live_rows(rows).filter(pa.array([k % 2 == 1 for k in rows.column("k").to_pylist()]))  # noqa: E731
    fold_parts(
        Snapshot(old, ("k",)), _numbers(range(0)), ("k",), dropping_evens, _read_parts, new, part_rows=10, carry=False
    )
    keys = sorted(k for (p,) in Snapshot(new, ("k",)).parts() for k in pq.read_table(p).column("k").to_pylist())
    assert keys == list(range(1, 30, 2))


def test_a_reader_of_touched_keys_opens_only_their_parts(tmp_path):
    state = LiveState(tmp_path / "state", ("k",), part_rows=10)
    for batch_id in range(COMPACT_EVERY):
        state.record(_numbers(range(batch_id * 10, batch_id * 10 + 10)), batch_id)
    snapshot = Snapshot(tmp_path / "state" / f"snapshot-{COMPACT_EVERY:012d}", ("k",))
    assert len(snapshot.parts()) == COMPACT_EVERY
    opened = snapshot.files_for(pa.table({"k": pa.array([35, 37, 71], pa.int64())}))
    assert [os.path.basename(f) for f in opened] == ["part-00003.parquet", "part-00007.parquet"]
    below_all = snapshot.files_for(pa.table({"k": pa.array([-5, None], pa.int64())}))
    assert [os.path.basename(f) for f in below_all] == ["part-00000.parquet"]


def test_one_key_never_spans_two_parts(tmp_path):
    """A keyed operator keeps several live rows per key: a part is cut only where the key changes."""
    rows = pa.table(
        {
            "k": pa.array([1] * 5 + [2] * 5 + [3], pa.int64()),
            "v": pa.array(range(11), pa.int64()),
            COUNT: pa.array([1] * 11, pa.int64()),
        }
    )
    fold_parts(None, rows, ("k",), live_rows, _read_parts, tmp_path, part_rows=3, carry=True)
    parts = [pq.read_table(p).column("k").to_pylist() for (p,) in Snapshot(tmp_path, ("k",)).parts()]
    assert parts == [[1] * 5, [2] * 5, [3]]


def test_logs_of_many_rows_are_folded_before_eight_have_gathered(tmp_path):
    """A fold holds its logs whole: past `fold_rows` rows of them it folds at once."""
    state = LiveState(tmp_path / "state", ("k",), part_rows=10, fold_rows=25)
    for batch_id in range(4):
        state.record(_numbers(range(batch_id * 10, batch_id * 10 + 10)), batch_id)
    snapshots = sorted(p.name for p in (tmp_path / "state").glob("snapshot-*"))
    assert snapshots == ["snapshot-000000000003"]  # after the third log: 30 rows
    assert sorted(state.rows_before(4, None, _numbers(range(0)).schema).column("k").to_pylist()) == list(range(40))
