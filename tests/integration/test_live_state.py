"""A keyed operator's state (jobs/stream/live_state.py): compacted snapshots plus short logs give
the same live rows as the whole history, stay bounded on disk, and a replayed micro-batch reads
what it read the first time."""

import random
from collections import Counter

import pyarrow as pa

from jobs.changelog.columns import COUNT
from jobs.stream.live_state import COMPACT_EVERY, LiveState

DDL = "k BIGINT, v STRING"


def _net(rng: random.Random, live: Counter) -> Counter:
    """A micro-batch's net changes: some rows added, some live rows taken away."""
    net = Counter()
    for _ in range(rng.randrange(1, 6)):
        row = (rng.randrange(20), f"v{rng.randrange(3)}")
        net[row] += 1
    for row in rng.sample(sorted(live), min(len(live), rng.randrange(4))):
        net[row] -= live[row]
    return Counter({row: n for row, n in net.items() if n != 0})


def _table(net: Counter) -> pa.Table:
    rows = sorted(net.items())
    return pa.table({"k": pa.array([r[0] for r, _ in rows], pa.int64()),
                     "v": pa.array([r[1] for r, _ in rows], pa.string()),
                     COUNT: pa.array([n for _, n in rows], pa.int64())})


def _live(state: LiveState, spark, batch_id: int) -> Counter:
    counts = Counter()
    for row in state.changes_before(spark, batch_id).collect():
        counts[(row["k"], row["v"])] += row[COUNT]
    return +counts


def test_snapshots_and_logs_hold_the_live_rows_of_the_whole_history(spark, tmp_path):
    rng, state, live = random.Random(3), LiveState(tmp_path / "state", DDL, ("k",)), Counter()
    batches = 3 * COMPACT_EVERY + 2
    for batch_id in range(batches):
        assert _live(state, spark, batch_id) == live
        net = _net(rng, live)
        state.record(spark, _table(net), batch_id)
        live.update(net)
        live = +live
    assert _live(state, spark, batches) == live
    names = [p.name for p in (tmp_path / "state").iterdir()]
    assert sum(n.startswith("snapshot-") for n in names) <= 2
    assert sum(n.startswith("batch-") for n in names) <= 2 * COMPACT_EVERY


def test_a_replayed_micro_batch_reads_the_state_it_read_the_first_time(spark, tmp_path):
    rng, state, live = random.Random(5), LiveState(tmp_path / "state", DDL, ("k",)), Counter()
    for batch_id in range(COMPACT_EVERY):  # the last of these compacts
        before, net = Counter(live), _net(rng, live)
        state.record(spark, _table(net), batch_id)
        live.update(net)
        live = +live
    last = COMPACT_EVERY - 1
    assert (tmp_path / "state" / f"snapshot-{COMPACT_EVERY:012d}").is_dir()
    assert _live(state, spark, last) == before  # the snapshot it wrote is not what it reads
    state.record(spark, _table(net), last)  # the replay writes the same again
    assert _live(state, spark, last) == before
    assert _live(state, spark, last + 1) == live


def test_only_a_first_micro_batch_and_its_replay_find_no_state(spark, tmp_path):
    state, picked = LiveState(tmp_path / "state", DDL, ("k",)), []

    def pick(history):
        picked.append(True)
        return history

    assert state.live_before(spark, 0, pick).count() == 0 and picked == []
    state.record(spark, _table(Counter({(1, "v0"): 1})), 0)
    # a replay of micro-batch 0 reads nothing, as the first try did
    assert state.live_before(spark, 0, pick).count() == 0 and picked == []
    assert state.live_before(spark, 1, pick).collect()[0][COUNT] == 1 and picked == [True]
    state.record(spark, _table(Counter({(1, "v0"): -1})), 1)
    state.live_before(spark, 2, pick)
    assert picked == [True, True]  # a log of changes that cancel out is still state to read
    assert _live(state, spark, 2) == Counter()
