"""stream.state_store: Spark's RocksDB store gives the results the default (in-memory) store
gives, across restarts, and a run folder keeps the store its first run chose."""

from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.job import run_stream
from jobs.stream.state_store import recorded_store
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import feed_steps, run_both, same_rows

# MIN and MAX keep value multisets in the state store beside the sums and counts.
SQL = ("SELECT pId, SUM(income) AS total, COUNT(*) AS n, MIN(income) AS lo, MAX(income) AS hi "
       "FROM orders GROUP BY pId")
COLUMNS = ["pId", "total", "n", "lo", "hi"]
FIRST = [change("+I", 1, 1, 5), change("+I", 2, 1, 1), change("+I", 3, 2, 9), change("+I", 4, 2, 4),
         change("-U", 2, 1, 1), change("+U", 2, 2, 1)]
SECOND = [change("-D", 3, 2, 9), change("-U", 1, 1, 5), change("+U", 1, 1, 7), change("+I", 5, 3, 2),
          change("-D", 5, 3, 2)]


def _two_runs(folder, out, store: str):
    """The same changelog in two files streamed by two runs (the second restarts the query)."""
    spec = orders_spec(folder, SQL, rows_per_batch=2, stream={"state_store": store}, name=f"q_{store}")
    write_changelog(folder / "orders", "001.json", FIRST)
    run_both(spec, out)
    write_changelog(folder / "orders", "002.json", SECOND)
    return run_both(spec, out)


def test_rocksdb_state_gives_the_memory_states_changelog_across_a_restart(spark, tmp_path):
    in_memory = _two_runs(tmp_path / "memory", tmp_path / "out", "memory")
    rocksdb = _two_runs(tmp_path / "rocksdb", tmp_path / "out", "rocksdb")
    assert recorded_store(in_memory.layout.checkpoint) == "memory"
    assert recorded_store(rocksdb.layout.checkpoint) == "rocksdb"
    assert feed_steps(rocksdb.feed, COLUMNS) == feed_steps(in_memory.feed, COLUMNS)
    assert same_rows(rocksdb.stream, rocksdb.batch)
    assert rocksdb.stream == [{"pId": 1, "total": 7, "n": 1, "lo": 7, "hi": 7},
                              {"pId": 2, "total": 5, "n": 2, "lo": 1, "hi": 4}]


def test_a_run_folder_keeps_the_store_of_its_first_run_and_says_so(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", FIRST)
    first = orders_spec(tmp_path, SQL, stream={"state_store": "memory"})
    layout = RunLayout.for_query(tmp_path / "out", "q")
    run_stream(plan_query(load_spec(first)), Settings(), layout)
    write_changelog(tmp_path / "orders", "002.json", SECOND)
    changed = orders_spec(tmp_path, SQL, stream={"state_store": "rocksdb"})
    said: list[str] = []
    run_stream(plan_query(load_spec(changed)), Settings(), layout, Progress(emit=said.append))
    assert recorded_store(layout.checkpoint) == "memory"
    assert any("stream.state_store is rocksdb, but this run folder's state is kept in memory" in line
               for line in said)


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
