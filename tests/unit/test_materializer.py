import math
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import DELETE, OP, UPSERT, WEIGHT
from jobs.errors import RunStateError
from jobs.stream.operators.materialize.on_lockstep_state import UpsertMaterializer

# Seed 003: s1 JOIN s2 ON s1.level = s2.id, written to a sink keyed by s1.id. s1's row 1 moves
# from level 10 to level 20, so the join retracts A1 and adds B1: different rows, one sink key.
COLUMNS = ("id", "level", "attr")
SCHEMA = pa.schema([("id", pa.int64()), ("level", pa.int64()), ("attr", pa.string())])
A1, B1 = (1, 10, "a1"), (1, 20, "b1")


def materializer(state_dir: Path, key: tuple[str, ...] = ("id",)) -> UpsertMaterializer:
    return UpsertMaterializer(key, COLUMNS, state_dir)


def changes(*steps: tuple[int, tuple]) -> pa.Table:
    table = pa.Table.from_pylist([dict(zip(COLUMNS, row)) for _, row in steps], schema=SCHEMA)
    return table.append_column(WEIGHT, pa.array([weight for weight, _ in steps], pa.int32()))


def written(output: pa.Table) -> list[tuple[str, tuple]]:
    return [(row[OP], tuple(row[c] for c in COLUMNS)) for row in output.to_pylist()]


@pytest.mark.parametrize(
    "arrival",
    [
        [(+1, A1), (-1, A1), (+1, B1)],  # +I a1, -U a1, +U b1: the order they happened in
        [(+1, B1), (+1, A1), (-1, A1)],  # +U b1 overtakes both
        [(+1, A1), (+1, B1), (-1, A1)],  # -U a1 comes last
    ],
    ids=["in-order", "update-after-first", "update-before-last"],
)
def test_every_arrival_order_of_seed_003_in_one_micro_batch_ends_with_b1(tmp_path, arrival):
    assert written(materializer(tmp_path).apply(changes(*arrival), 0)) == [(UPSERT, B1)]


@pytest.mark.parametrize(
    "arrival, outputs",
    [
        ([(+1, B1), (+1, A1), (-1, A1)], [B1, A1, B1]),  # a1 shows until it is retracted
        ([(+1, A1), (+1, B1), (-1, A1)], [A1, B1, B1]),  # retracting an older row leaves b1 in place
    ],
    ids=["update-after-first", "update-before-last"],
)
def test_seed_003_one_change_per_micro_batch_shows_the_newest_live_row(tmp_path, arrival, outputs):
    sink = materializer(tmp_path)
    steps = [written(sink.apply(changes(step), batch)) for batch, step in enumerate(arrival)]
    assert steps == [[(UPSERT, row)] for row in outputs]


def test_retracting_the_last_live_row_deletes_the_key_with_its_values(tmp_path):
    sink = materializer(tmp_path)
    assert written(sink.apply(changes((+1, A1)), 0)) == [(UPSERT, A1)]
    assert written(sink.apply(changes((-1, A1)), 1)) == [(DELETE, A1)]
    assert sink.state_rows() == 0


def test_an_addition_and_its_retraction_in_one_micro_batch_delete_the_key(tmp_path):
    assert written(materializer(tmp_path).apply(changes((+1, A1), (-1, A1)), 0)) == [(DELETE, A1)]


def test_only_touched_keys_are_written_in_the_order_first_touched(tmp_path):
    sink = materializer(tmp_path)
    sink.apply(changes((+1, A1), (+1, (2, 10, "a1"))), 0)
    assert written(sink.apply(changes((+1, (3, 20, "b1")), (+1, B1)), 1)) == [(UPSERT, (3, 20, "b1")), (UPSERT, B1)]


def test_a_key_with_two_distinct_live_rows_is_a_violation(tmp_path):
    sink = materializer(tmp_path)
    sink.apply(changes((+1, A1), (+1, B1), (+1, (2, 10, "a1")), (+1, (2, 10, "a1"))), 0)
    assert sink.violations() == [
        {"key": {"id": 1}, "rows": [{"id": 1, "level": 10, "attr": "a1"}, {"id": 1, "level": 20, "attr": "b1"}]}
    ]
    assert sink.state_rows() == 4


def test_a_retraction_of_a_row_that_is_not_live_is_an_error(tmp_path):
    sink = materializer(tmp_path)
    sink.apply(changes((+1, A1)), 0)
    with pytest.raises(RunStateError, match=r"sink key \(id=1\).*attr='zz'"):
        sink.apply(changes((-1, (1, 10, "zz"))), 1)


def test_a_micro_batch_that_failed_half_way_is_retried_from_the_saved_state(tmp_path):
    sink = materializer(tmp_path)
    sink.apply(changes((+1, A1)), 0)
    with pytest.raises(RunStateError):
        sink.apply(changes((+1, B1), (-1, (9, 9, "never added"))), 1)
    assert written(sink.apply(changes((+1, B1)), 1)) == [(UPSERT, B1)]
    assert sink.state_rows() == 2


@pytest.mark.parametrize("restart", [True, False], ids=["after-a-crash", "in-the-same-process"])
def test_a_replayed_micro_batch_gives_the_same_output(tmp_path, restart):
    sink = materializer(tmp_path)
    sink.apply(changes((+1, A1)), 0)
    first = sink.apply(changes((+1, B1), (-1, A1)), 1)  # writes state-1, then "crashes"
    if restart:
        sink = materializer(tmp_path)
    assert sink.apply(changes((+1, B1), (-1, A1)), 1).equals(first)
    assert written(sink.apply(changes((-1, B1)), 2)) == [(DELETE, B1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state-000000000001.parquet", "state-000000000002.parquet"]


def test_a_replay_older_than_the_kept_state_is_an_error(tmp_path):
    sink = materializer(tmp_path)
    for batch_id in range(3):
        sink.apply(changes((+1, (batch_id, 10, "a1"))), batch_id)
    with pytest.raises(RunStateError, match="micro-batch 1 is replayed"):
        materializer(tmp_path).apply(changes((+1, B1)), 1)


def test_times_and_nan_survive_the_saved_state(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("at", pa.timestamp("us", tz="UTC")), ("x", pa.float64())])
    row = {"k": 1, "at": datetime(2024, 5, 18, 21, 58, tzinfo=UTC), "x": math.nan}

    def one(weight: int) -> pa.Table:
        table = pa.Table.from_pylist([row], schema=schema)
        return table.append_column(WEIGHT, pa.array([weight], pa.int8()))

    UpsertMaterializer(("k",), schema.names, tmp_path).apply(one(+1), 0)
    output = UpsertMaterializer(("k",), schema.names, tmp_path).apply(one(-1), 1)
    assert output.schema.field("at").type == schema.field("at").type
    deleted = output.to_pylist()[0]
    assert deleted[OP] == DELETE and deleted["at"] == row["at"] and math.isnan(deleted["x"])


# Few values, so that a key often holds identical rows and the newest copy must be retracted.
ROWS = st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 1), st.sampled_from(["a", None]))
# One key column is matched in Arrow when the state is saved, a composite one in Python.
KEYS = st.sampled_from([("id",), ("id", "level")])


@st.composite
def changelogs_in_micro_batches(draw) -> list[list[tuple[int, tuple]]]:
    """Additions of random rows and retractions of live ones (any live row, not only its
    key's newest, so the row showing may or may not change), cut into micro-batches."""
    live: list[tuple] = []
    steps: list[tuple[int, tuple]] = []
    for _ in range(draw(st.integers(1, 40))):
        if live and draw(st.booleans()):
            row = live.pop(draw(st.integers(0, len(live) - 1)))
            steps.append((-1, row))
        else:
            row = draw(ROWS)
            live.append(row)
            steps.append((+1, row))
    cuts = draw(st.sets(st.integers(1, len(steps) - 1), max_size=6)) if len(steps) > 1 else set()
    bounds = [0, *sorted(cuts), len(steps)]
    return [steps[start:end] for start, end in zip(bounds, bounds[1:])]


def newest_live_row_per_key(steps: list[tuple[int, tuple]], width: int) -> dict[tuple, tuple]:
    """The reference: mark each retraction's newest identical live addition dead, then take
    the newest addition still alive for each key."""
    added: list[tuple] = []
    alive: list[bool] = []
    for weight, row in steps:
        if weight == 1:
            added.append(row)
            alive.append(True)
        else:
            newest = max(i for i, r in enumerate(added) if r == row and alive[i])
            alive[newest] = False
    return {row[:width]: row for row, is_alive in zip(added, alive) if is_alive}


@settings(max_examples=80, deadline=None)
@given(changelogs_in_micro_batches(), KEYS, st.lists(st.booleans(), min_size=8, max_size=8))
def test_the_sink_holds_the_newest_live_row_of_every_key(batches, key, restarts):
    """Applied as upserts and deletes, the output keeps the reference's rows after every
    micro-batch, whether the materializer goes on in memory or restarts from its saved state."""
    width = len(key)  # the key columns come first in COLUMNS
    sink_table: dict[tuple, tuple] = {}
    seen: list[tuple[int, tuple]] = []
    with tempfile.TemporaryDirectory() as state_dir:
        sink = materializer(Path(state_dir), key)
        for batch_id, (batch, restart) in enumerate(zip(batches, restarts)):
            if restart:
                sink = materializer(Path(state_dir), key)
            for op, row in written(sink.apply(changes(*batch), batch_id)):
                if op == UPSERT:
                    sink_table[row[:width]] = row
                else:
                    sink_table.pop(row[:width], None)  # the key may be new and gone in one batch
            seen += batch
            assert sink_table == newest_live_row_per_key(seen, width)
