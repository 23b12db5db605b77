"""stream.state_store: lockstep's own state (the default) and Spark's two stores give one
changelog, across restarts, and a run folder keeps the store its first run chose (a folder an
older lockstep started on Spark's store stays there); a state TTL forgets idle groups."""

import time

import pytest

from jobs.batch.job import run_batch
from jobs.changelog.columns import COUNT, SLOT
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.job import run_stream
from jobs.stream.operators.aggregate.group_sums import groups_now
from jobs.stream.operators.aggregate.state_store import recorded_store, store_in_effect
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import feed_steps, run_both, same_rows, table_rows

# MIN and MAX keep value multisets in the state store beside the sums and counts.
SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS n, MIN(income) AS lo, MAX(income) AS hi FROM orders GROUP BY pId"
COLUMNS = ["pId", "total", "n", "lo", "hi"]
FIRST = [
    change("+I", 1, 1, 5),
    change("+I", 2, 1, 1),
    change("+I", 3, 2, 9),
    change("+I", 4, 2, 4),
    change("-U", 2, 1, 1),
    change("+U", 2, 2, 1),
]
SECOND = [
    change("-D", 3, 2, 9),
    change("-U", 1, 1, 5),
    change("+U", 1, 1, 7),
    change("+I", 5, 3, 2),
    change("-D", 5, 3, 2),
]


def _two_runs(folder, out, store: str):
    """The same changelog in two files streamed by two runs (the second restarts the query)."""
    spec = orders_spec(folder, SQL, rows_per_batch=2, stream={"state_store": store}, name=f"q_{store}")
    write_changelog(folder / "orders", "001.json", FIRST)
    run_both(spec, out)
    write_changelog(folder / "orders", "002.json", SECOND)
    return run_both(spec, out)


def test_every_store_gives_the_memory_states_changelog_across_a_restart(spark, tmp_path):
    in_memory = _two_runs(tmp_path / "memory", tmp_path / "out", "memory")
    assert recorded_store(in_memory.layout.checkpoint) == "memory"
    for store in ("rocksdb", "lockstep"):
        other = _two_runs(tmp_path / store, tmp_path / "out", store)
        assert store_in_effect(other.layout.aggregate_state, other.layout.checkpoint, "memory") == store
        assert feed_steps(other.feed, COLUMNS) == feed_steps(in_memory.feed, COLUMNS)
        assert same_rows(other.stream, other.batch)
        assert other.stream == [
            {"pId": 1, "total": 7, "n": 1, "lo": 7, "hi": 7},
            {"pId": 2, "total": 5, "n": 2, "lo": 1, "hi": 4},
        ]
    # lockstep keeps no Spark state; its live groups are products 1 and 2 (3 was emptied).
    lockstep = RunLayout.for_query(tmp_path / "out", "q_lockstep")
    assert not (lockstep.checkpoint / "state").exists()
    groups = groups_now(lockstep.aggregate_state, ("pId", SLOT, "__v2", "__v3"), 99).to_pylist()
    assert {g["pId"] for g in groups if g[SLOT] == 0 and g[COUNT]} == {1, 2}


@pytest.mark.parametrize("first_store, later_store", [("memory", "lockstep"), ("lockstep", "rocksdb")])
def test_a_run_folder_keeps_the_store_of_its_first_run_and_says_so(spark, tmp_path, first_store, later_store):
    write_changelog(tmp_path / "orders", "001.json", FIRST)
    first = orders_spec(tmp_path, SQL, stream={"state_store": first_store})
    layout = RunLayout.for_query(tmp_path / "out", "q")
    run_stream(plan_query(load_spec(first)), Settings(), layout)
    write_changelog(tmp_path / "orders", "002.json", SECOND)
    changed = orders_spec(tmp_path, SQL, stream={"state_store": later_store})
    said: list[str] = []
    plan = plan_query(load_spec(changed))
    run_stream(plan, Settings(), layout, Progress(emit=said.append))
    run_batch(plan, Settings(), layout)
    assert store_in_effect(layout.aggregate_state, layout.checkpoint, later_store) == first_store
    assert any(
        f"stream.state_store is {later_store}, but this run folder's state is kept in {first_store}" in line
        for line in said
    )
    assert same_rows(table_rows(layout.stream), table_rows(layout.batch))


def test_a_query_without_aggregation_state_says_nothing_about_the_store(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", FIRST)
    projection = "SELECT order_id, pId, income FROM orders WHERE income > 2"
    layout = RunLayout.for_query(tmp_path / "out", "q")
    run_stream(plan_query(load_spec(orders_spec(tmp_path, projection))), Settings(), layout)
    write_changelog(tmp_path / "orders", "002.json", SECOND)
    said: list[str] = []
    changed = orders_spec(tmp_path, projection, stream={"state_store": "rocksdb"})
    run_stream(plan_query(load_spec(changed)), Settings(), layout, Progress(emit=said.append))
    assert said and not any("state_store" in line for line in said)


def test_a_state_ttl_forgets_a_group_idle_for_longer_and_the_plan_says_what_that_means(spark, tmp_path):
    sums = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"
    spec = orders_spec(tmp_path, sums, rows_per_batch=10, stream={"state_ttl": "1 second"})
    layout = RunLayout.for_query(tmp_path / "out", "q")
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 5), change("+I", 2, 2, 3)])
    run_stream(plan_query(load_spec(spec)), Settings(), layout)
    time.sleep(1.5)  # both groups idle for longer than the TTL
    write_changelog(tmp_path / "orders", "002.json", [change("+I", 3, 1, 7), change("-D", 2, 2, 3)])
    plan = plan_query(load_spec(spec))
    said: list[str] = []
    run_stream(plan, Settings(), layout, Progress(emit=said.append))
    # Product 1 starts again from its new row; product 2's retraction finds no state and is
    # ignored, so its row stays in the sink, as in Flink. Both counted and said.
    assert table_rows(layout.stream) == [{"pId": 1, "total": 7, "n": 1}, {"pId": 2, "total": 3, "n": 1}]
    assert any(
        "1 group(s) whose changes only retracted state forgotten by stream.state_ttl ignored" in line for line in said
    )
    assert any("stream.state_ttl is 1 second" in warning for warning in plan.warnings)
