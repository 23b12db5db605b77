"""The stream job against the batch job on hand-made changelogs, step by step."""

from jobs.runtime.layout import RunLayout
from jobs.stream.handler import SPARK_DURATIONS
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import feed_steps, run_both, same_rows


def test_group_aggregate_emits_retractions_step_by_step(spark, tmp_path, out):
    # One change per micro-batch (an update's -U and +U travel together).
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 5),  # +I (1, 5)
            change("+I", 2, 1, 3),  # -U (1, 5) +U (1, 8)
            change("-U", 1, 1, 5),  # order 1 moves to product 2:
            change("+U", 1, 2, 5),  #   -U (1, 8) +U (1, 3), +I (2, 5)
            change("-D", 2, 1, 3),  # product 1 loses its last order: -D (1, 3)
            change("+I", 3, 1, 1),  # and comes back: +I (1, 1)
        ],
    )
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", rows_per_batch=1)
    result = run_both(spec, out)
    assert feed_steps(result.feed, ["pId", "total"]) == [
        (1, "+I", 1, 5),
        (2, "-U", 1, 5),
        (2, "+U", 1, 8),
        (3, "-U", 1, 8),
        (3, "+U", 1, 3),
        (3, "+I", 2, 5),
        (4, "-D", 1, 3),
        (5, "+I", 1, 1),
    ]
    assert result.stream == result.batch == [{"pId": 1, "total": 1}, {"pId": 2, "total": 5}]


def test_min_max_recover_the_previous_extreme_and_distinct_counts_ignore_nulls(spark, tmp_path, out):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 5),
            change("+I", 2, 1, 1),
            change("+I", 3, 1, 9),
            change("+I", 4, 1, None),
            change("+I", 5, 2, 5),
        ],
    )
    write_changelog(
        tmp_path / "orders",
        "002.json",
        [
            change("-D", 2, 1, 1),  # MIN 1 goes: back to 5
            change("-U", 3, 1, 9),
            change("+U", 3, 1, 4),  # MAX 9 goes: back to 5; MIN now 4
            change("-D", 5, 2, 5),  # product 2 empties
        ],
    )
    sql = (
        "SELECT pId, MIN(income) AS lo, MAX(income) AS hi, COUNT(DISTINCT income) AS incomes, "
        "COUNT(income) AS counted, COUNT(*) AS n, AVG(income) AS avg_income FROM orders GROUP BY pId"
    )
    result = run_both(orders_spec(tmp_path, sql, rows_per_batch=2), out)
    assert result.stream == [{"pId": 1, "lo": 4, "hi": 5, "incomes": 2, "counted": 2, "n": 3, "avg_income": 4.5}]
    assert same_rows(result.stream, result.batch)


def test_projection_passes_retractions_through_and_a_filter_turns_updates_into_deletes(spark, tmp_path, out):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 50),
            change("+I", 2, 1, 500),
            change("-U", 1, 1, 50),
            change("+U", 1, 1, 700),  # now passes the filter: +I
            change("-U", 2, 1, 500),
            change("+U", 2, 1, 10),  # no longer passes: -D
            change("+I", 3, 2, 900),
            change("-D", 3, 2, 900),  # in and out within one batch: nothing
        ],
    )
    sql = "SELECT order_id, pId, income FROM orders WHERE income > 100"
    result = run_both(orders_spec(tmp_path, sql, rows_per_batch=2), out)
    assert result.stream == result.batch == [{"order_id": 1, "pId": 1, "income": 700}]
    kinds = [step[1] for step in feed_steps(result.feed, ["order_id"])]
    assert kinds == ["+I", "+I", "-D"]  # order 2 in; order 1 in; order 2 out


def test_having_deletes_a_group_that_stops_qualifying_and_global_aggregates_keep_their_row(spark, tmp_path, out):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [change("+I", 1, 1, 5), change("+I", 2, 1, 6), change("-D", 2, 1, 6), change("-D", 1, 1, 5)],
    )
    having = run_both(
        orders_spec(
            tmp_path,
            "SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId HAVING COUNT(*) > 1",
            rows_per_batch=1,
            name="having",
        ),
        out,
    )
    assert having.stream == having.batch == []
    assert [s[1] for s in feed_steps(having.feed, ["pId"])] == ["+I", "-D"]
    total = run_both(
        orders_spec(
            tmp_path,
            "SELECT COUNT(*) AS n, SUM(income) AS s FROM orders",
            rows_per_batch=1,
            name="total",
            sink={"primary_key": []},
        ),
        out,
    )
    assert total.stream == total.batch == [{"n": 0, "s": None}]


def test_a_second_stream_run_processes_only_new_files(spark, tmp_path, out):
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 5), change("+I", 2, 2, 7)])
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    first = run_both(spec, out)
    write_changelog(tmp_path / "orders", "002.json", [change("-U", 1, 1, 5), change("+U", 1, 1, 8)])
    second = run_both(spec, out)
    assert second.stream == second.batch == [{"pId": 1, "total": 8}, {"pId": 2, "total": 7}]
    log = RunLayout.for_query(out, "q").batches_log.read_text().splitlines()
    assert [eval_json(line)["start_seq"] for line in log] == [0, 2]
    assert first.feed.num_rows < second.feed.num_rows


def eval_json(line):
    import json

    return json.loads(line)


def test_the_run_folder_keeps_sparks_timing_of_each_micro_batch_that_read_rows(spark, tmp_path, out):
    write_changelog(tmp_path / "orders", "001.json", [change("+I", i, i % 2, i) for i in range(1, 6)])
    run_both(orders_spec(tmp_path, "SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId", rows_per_batch=2), out)
    layout = RunLayout.for_query(out, "q")
    timing = eval_json((layout.state / SPARK_DURATIONS).read_text())
    batches = [eval_json(line)["batch"] for line in layout.batches_log.read_text().splitlines()]
    assert sorted(map(int, timing)) == batches == [0, 1, 2]
    for durations in timing.values():
        assert {"addBatch", "walCommit", "triggerExecution"} <= set(durations)
        assert durations["triggerExecution"] >= durations["addBatch"]
