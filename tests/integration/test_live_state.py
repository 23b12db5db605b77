"""A keyed operator's state (jobs/stream/state/live_state.py): compacted snapshots plus short logs give
the same live rows as the whole history, stay bounded on disk, and a replayed micro-batch reads
what it read the first time."""

import random
import struct
from collections import Counter
from datetime import UTC

import pyarrow as pa
import pytest

from jobs.changelog.columns import COUNT
from jobs.stream.state.live_state import COMPACT_EVERY, LiveState


def _net(rng: random.Random, live: Counter) -> Counter:
    """A micro-batch's net changes: some rows added, some live rows taken away."""
    net = Counter()
    for _ in range(rng.randrange(1, 6)):
        row = (rng.randrange(20), f"v{rng.randrange(3)}")
        net[row] += 1
    for row in rng.sample(sorted(live, key=str), min(len(live), rng.randrange(4))):
        net[row] -= live[row]
    return Counter({row: n for row, n in net.items() if n != 0})


def _table(net: Counter) -> pa.Table:
    rows = sorted(net.items(), key=str)
    return pa.table(
        {
            "k": pa.array([r[0] for r, _ in rows], pa.int64()),
            "v": pa.array([r[1] for r, _ in rows], pa.string()),
            COUNT: pa.array([n for _, n in rows], pa.int64()),
        }
    )


def _live(state: LiveState, spark, batch_id: int) -> Counter:
    counts = Counter()
    for row in state.rows_before(batch_id, None, _table(Counter()).schema).to_pylist():
        counts[(row["k"], row["v"])] += row[COUNT]
    return +counts


def test_snapshots_and_logs_hold_the_live_rows_of_the_whole_history(spark, tmp_path):
    rng, state, live = random.Random(3), LiveState(tmp_path / "state", ("k",)), Counter()
    batches = 3 * COMPACT_EVERY + 2
    for batch_id in range(batches):
        assert _live(state, spark, batch_id) == live
        net = _net(rng, live)
        state.record(_table(net), batch_id)
        live.update(net)
        live = +live
    assert _live(state, spark, batches) == live
    names = [p.name for p in (tmp_path / "state").iterdir()]
    assert sum(n.startswith("snapshot-") for n in names) <= 2
    assert sum(n.startswith("batch-") for n in names) <= 2 * COMPACT_EVERY


def test_a_replayed_micro_batch_reads_the_state_it_read_the_first_time(spark, tmp_path):
    rng, state, live = random.Random(5), LiveState(tmp_path / "state", ("k",)), Counter()
    for batch_id in range(COMPACT_EVERY):  # the last of these compacts
        before, net = Counter(live), _net(rng, live)
        state.record(_table(net), batch_id)
        live.update(net)
        live = +live
    last = COMPACT_EVERY - 1
    assert (tmp_path / "state" / f"snapshot-{COMPACT_EVERY:012d}").is_dir()
    assert _live(state, spark, last) == before  # the snapshot it wrote is not what it reads
    state.record(_table(net), last)  # the replay writes the same again
    assert _live(state, spark, last) == before
    assert _live(state, spark, last + 1) == live


def _rows_of(state: LiveState, spark, batch_id: int, touched: pa.Table | None) -> Counter:
    rows = state.rows_before(batch_id, touched, _table(Counter()).schema)
    return Counter({(row["k"], row["v"]): row[COUNT] for row in rows.to_pylist()})


def _keys(values: list) -> pa.Table:
    return pa.table({"k": pa.array(values, pa.int64())})


def test_only_a_first_micro_batch_and_its_replay_find_no_state(spark, tmp_path):
    state = LiveState(tmp_path / "state", ("k",))
    assert _rows_of(state, spark, 0, None) == Counter()
    state.record(_table(Counter({(1, "v0"): 1})), 0)
    # a replay of micro-batch 0 reads nothing, as the first try did
    assert _rows_of(state, spark, 0, None) == Counter()
    assert _rows_of(state, spark, 1, _keys([1])) == Counter({(1, "v0"): 1})
    state.record(_table(Counter({(1, "v0"): -1})), 1)
    assert _rows_of(state, spark, 2, _keys([1])) == Counter()  # changes that cancel out leave nothing live


@pytest.mark.parametrize("keys", [("k",), ("k", "v")])
def test_the_live_rows_of_touched_keys_are_exactly_those_of_the_history(spark, tmp_path, keys):
    """Through snapshots (folded on the driver) and logs, with NULL keys: the rows read for a
    set of touched keys are the live rows whose keys equal one of them, a NULL equal to a NULL."""
    rng, state, live = random.Random(11), LiveState(tmp_path / "state", keys), Counter()
    for batch_id in range(2 * COMPACT_EVERY + 3):
        picked = [(rng.choice([None, *range(20)]), f"v{rng.randrange(3)}") for _ in range(rng.randrange(5))]
        touched = pa.table(
            {"k": pa.array([k for k, _ in picked], pa.int64()), "v": pa.array([v for _, v in picked], pa.string())}
        )
        expected = Counter(
            {
                row: n
                for row, n in live.items()
                if any(all(row[("k", "v").index(c)] == p[("k", "v").index(c)] for c in keys) for p in picked)
            }
        )
        assert _rows_of(state, spark, batch_id, touched.select(list(keys))) == expected, batch_id
        net = _net(rng, live)
        if rng.random() < 0.3:
            net[(None, "v1")] += 1
        state.record(_table(net), batch_id)
        live.update(net)
        live = +live


def test_a_floating_key_matches_as_spark_matches_it(spark, tmp_path):
    """-0.0 and 0.0 are one key to Spark, a NaN equals any NaN (whatever its payload): the
    touched keys find those rows."""
    other_nan = struct.unpack("d", struct.pack("Q", 0x7FF8000000000001))[0]
    state = LiveState(tmp_path / "state", ("k",))
    live = pa.table(
        {"k": pa.array([-0.0, float("nan"), 2.0]), "v": ["zero", "nan", "two"], COUNT: pa.array([1, 1, 1], pa.int64())}
    )
    state.record(live, 0)
    touched = pa.table({"k": pa.array([0.0, other_nan])})
    found = state.rows_before(1, touched, live.schema).to_pylist()
    assert sorted(row["v"] for row in found) == ["nan", "zero"]


def test_a_not_null_key_column_is_read_like_any_other(spark, tmp_path):
    """toArrow keeps a NOT NULL column's nullability; the touched keys' table has none to keep."""
    state = LiveState(tmp_path / "state", ("k",))
    schema = pa.schema(
        [pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string()), pa.field(COUNT, pa.int64())]
    )
    state.record(pa.table({"k": [1, 2], "v": ["a", "b"], COUNT: [1, 1]}, schema=schema), 0)
    found = state.rows_before(1, pa.table({"k": pa.array([2], pa.int64())}), schema).to_pylist()
    assert [(row["k"], row["v"]) for row in found] == [(2, "b")]


def test_no_rows_before_is_a_frame_spark_drops_from_a_join_without_a_job(spark, tmp_path):
    state = LiveState(tmp_path / "state", ("k",))
    empty = state.frame(spark, _table(Counter()))
    other = state.frame(spark, _table(Counter({(1, "v0"): 1}))).alias("o")
    joined = empty.alias("e").join(other, "k")
    # an empty local relation: the optimizer replaces the join with no rows, so no shuffle runs
    assert joined._jdf.queryExecution().optimizedPlan().toString().startswith("LocalRelation <empty>")
    assert joined.count() == 0 and empty.columns == ["k", "v", COUNT]


def test_a_snapshot_spark_wrote_is_still_read_and_folded(spark, tmp_path):
    """Run folders from before the fold moved to the driver hold snapshots Spark wrote (its part
    files, timestamps as INT96): they are read, and folded into the next snapshot, as they were."""
    from datetime import datetime

    state = LiveState(tmp_path / "state", ("k",))
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    old = spark.createDataFrame([(1, at, 1), (2, at, 2)], f"k BIGINT, t TIMESTAMP, {COUNT} BIGINT")
    old.repartition(1).write.parquet(str(tmp_path / "state" / "snapshot-000000000001"))
    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", tz="UTC")), (COUNT, pa.int64())])
    for batch_id in range(1, COMPACT_EVERY + 1):
        state.record(pa.table({"k": [3], "t": [at], COUNT: [1 if batch_id == 1 else 0]}, schema=schema), batch_id)
    assert (tmp_path / "state" / f"snapshot-{COMPACT_EVERY + 1:012d}").is_dir()
    found = state.rows_before(COMPACT_EVERY + 1, None, schema).to_pylist()
    assert sorted((r["k"], r["t"], r[COUNT]) for r in found) == [(1, at, 1), (2, at, 2), (3, at, 1)]
