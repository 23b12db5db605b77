"""The race (tests/benchmarks/race.py, `make race`) in small: one class at two tiny sizes, both
engines over the same generated Debezium files. What the race's table rests on: both engines
finish, lockstep reads every changelog row and its sink holds the right answer, the micro-batches
are logged, and the marginal rate is the extra rows over the extra seconds measured."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.cli.main import _parser
from tests.benchmarks.race import (
    CLASSES,
    FLINK_PYTHON,
    LOCAL,
    Engine,
    check_results,
    marginal_rates,
    print_where_time_goes,
    race_one,
)

pytestmark = pytest.mark.slow  # two engines' processes per size: about a minute

SIZES = (1_000, 3_000)  # logical events: start-up is most of the time at these sizes


@pytest.fixture(scope="module")
def raced(tmp_path_factory) -> tuple[Path, list[dict]]:
    # A missing oracle environment is a setup to run, not a test to skip.
    assert FLINK_PYTHON.exists(), f"{FLINK_PYTHON} is missing: run `make setup`, which creates the Flink environment"
    work = tmp_path_factory.mktemp("race")
    # lockstep's whole run at the smaller size only: what it adds is the same at both
    return work, [race_one(CLASSES["group_aggregate"], s, work=work, whole_run=s == SIZES[0]) for s in SIZES]


def test_both_engines_finish_every_size(raced):
    _, rows = raced
    for row in rows:
        for engine in ("flink", "lockstep"):
            run = row[engine]
            assert run["exit"] == 0, f"{engine} at {row['size']}: {run['error']}"
            assert run["seconds"] > 0 and run["peak_mib"] > 0
        assert 0 < row["flink"]["query_seconds"] < row["flink"]["seconds"]  # flink_race.py reported its job


def test_lockstep_reads_every_row_in_logged_micro_batches(raced):
    _, rows = raced
    assert rows[0]["rows"] < rows[1]["rows"]
    for row in rows:
        [stage] = row["stages"]  # a group aggregate is one stage
        assert stage["count"] >= 1 and stage["rows"] == row["rows"]
        assert 0 < stage["first_tenth_seconds"] and 0 < stage["last_tenth_seconds"]
        assert "note" not in row["lockstep"]
        assert 0 < row["lockstep"]["first_batch_seconds"] < row["lockstep"]["seconds"]  # ended inside the run


def test_lockstep_sink_holds_the_aggregate_of_the_debezium_file(raced):
    work, rows = raced
    folder = work / f"group_aggregate-{rows[-1]['size']}"
    sink = DeltaTable(str(folder / "runs" / "race_group_aggregate" / "stream")).to_pyarrow_table().to_pylist()
    assert sorted((r["pId"], r["total"], r["orders"]) for r in sink) == _aggregate(folder / "orders")


def test_flinks_result_and_lockstep_s_sink_are_checked_equal(raced):
    _, rows = raced
    assert [row["results"] for row in rows] == ["equal", "equal"]


def test_a_sink_that_lost_a_group_is_reported_against_flinks_result(raced):
    work, rows = raced
    folder = work / f"group_aggregate-{rows[0]['size']}"
    sink = folder / "runs" / "race_group_aggregate" / "stream"
    lost = DeltaTable(str(sink)).to_pyarrow_table().to_pylist()[0]
    DeltaTable(str(sink)).delete(f"pId = {lost['pId']}")
    found = check_results(folder, CLASSES["group_aggregate"])
    groups = len(_aggregate(folder / "orders"))
    assert found.startswith(
        f"{groups - 1} vs {groups} rows; 1 row(s) only in the reference, e.g. "
        f"({lost['pId']}, {lost['total']}, {lost['orders']})"
    )


def test_the_marginal_rate_is_extra_rows_over_extra_seconds(raced):
    _, (small, large) = raced
    [rates] = marginal_rates([small, large])
    for engine in ("flink", "lockstep"):
        extra = large[engine]["seconds"] - small[engine]["seconds"]
        expected = (large["rows"] - small["rows"]) / extra if extra > 0 else None
        assert rates[f"{engine}_rows_per_second"] == pytest.approx(expected)
        assert (expected is None) == (engine in rates["why_missing"])
    flink, mine = rates["flink_rows_per_second"], rates["lockstep_rows_per_second"]
    assert rates["lockstep_over_flink"] == (pytest.approx(flink / mine) if flink and mine else None)


def test_the_whole_run_is_timed_with_its_steps_and_the_checks_phases(raced, capsys):
    _, (small, large) = raced
    run = small["run"]
    assert run["exit"] == 0 and run["verdict"] == "pass", run["error"]
    assert list(run["steps"]) == ["stream", "batch", "check"]
    assert 0 < sum(run["steps"].values()) < run["seconds"]  # the rest: the process's start
    assert any(phase["spark_jobs"] > 0 for phase in run["check_phases"].values())
    assert "run" not in large and marginal_rates([small, large])[0]["run_rows_per_second"] is None
    print_where_time_goes([small, large])
    table = capsys.readouterr().out
    assert (
        f"| group_aggregate | {small['rows']:,} | PASS | {run['seconds']:.1f} | {run['steps']['stream']:.1f} |" in table
    )
    assert f"| {large['rows']:,} |" not in table


def _aggregate(orders: Path) -> list[tuple[int, int, int]]:
    """SUM(income), COUNT(*) per pId over the orders left live by the Debezium lines."""
    live = {}
    for line in (orders / "part-00000.json").read_text().splitlines():
        change = json.loads(line)
        if change["before"]:
            del live[change["before"]["order_id"]]
        if change["after"]:
            live[change["after"]["order_id"]] = change["after"]
    groups = defaultdict(lambda: [0, 0])
    for order in live.values():
        groups[order["pId"]][0] += order["income"]
        groups[order["pId"]][1] += 1
    return sorted((p, total, count) for p, (total, count) in groups.items())


def test_the_spark_engine_is_asked_for_in_arguments_that_lockstep_stream_and_run_take():
    engine = Engine("spark", "spark://127.0.0.1:7077")
    for step in ("stream", "run"):
        args = _parser().parse_args([step, "q.yaml", *engine.arguments()])
        assert (args.engine, args.master) == ("spark", "spark://127.0.0.1:7077")
        assert _parser().parse_args([step, "q.yaml", *LOCAL.arguments()]).master is None
