"""Lookup joins on real Spark against a real HTTP dimension service: the enriched query's stream
equals its batch when the dimension does not change, retractions are enriched like their
insertions, a LEFT lookup join pads missing rows with nulls, and a dimension that changes
between the two runs shows up as a difference."""

import pytest
import yaml

from tests.conftest import write_changelog
from tests.integration.conftest import run_both
from tests.support.dimension_server import DimensionServer

CUSTOMERS = {
    "7": {"customer_id": 7, "name": "Ana", "tier": "gold"},
    "8": {"customer_id": 8, "name": "Ben", "tier": "silver"},
    "9": {"customer_id": 9, "name": "Cho", "tier": "gold"},
}
EVENTS = [  # (op, order_id, customer_id, amount)
    ("+I", 1, 7, 5),
    ("+I", 2, 8, 3),
    ("+I", 3, 9, 4),
    ("-U", 2, 8, 3),
    ("+U", 2, 7, 6),
    ("+I", 4, 5, 2),
    ("-D", 1, 7, 5),
    ("+I", 5, 8, 1),
]


@pytest.fixture
def service():
    with DimensionServer({"customers": CUSTOMERS}, latency=0.005) as server:
        yield server


def _spec(tmp_path, service, sql: str, order: str = "ordered"):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [{"op": op, "order_id": o, "customer_id": c, "amount": a} for op, o, c, a in EVENTS],
    )
    spec = {
        "name": "enriched",
        "sql": sql,
        "sources": {
            "orders": {
                "path": "orders",
                "format": "changelog-json",
                "primary_key": ["order_id"],
                "schema": "order_id BIGINT, customer_id BIGINT, amount BIGINT",
            }
        },
        "lookups": {
            "customers": {
                "kind": "http",
                "url": service.url + "/customers/{customer_id}",
                "key": ["customer_id"],
                "output": "name STRING, tier STRING",
                "capacity": 4,
                "order": order,
            }
        },
        "stream": {"rows_per_batch": 3},
    }
    path = tmp_path / "enriched.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("order", ["ordered", "unordered"])
def test_an_enriched_aggregate_streams_what_the_batch_computes(spark, tmp_path, service, order):
    spec = _spec(
        tmp_path,
        service,
        "SELECT c.tier, COUNT(*) AS orders, SUM(o.amount) AS amount FROM orders o "
        "JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.tier",
        order,
    )
    result = run_both(spec, tmp_path / "runs")
    # Order 4's customer 5 has no dimension row: the inner lookup join drops it.
    assert (
        result.stream
        == result.batch
        == [{"tier": "gold", "orders": 2, "amount": 10}, {"tier": "silver", "orders": 1, "amount": 1}]
    )
    assert service.max_concurrent <= 4


def test_a_left_lookup_join_pads_missing_dimension_rows_with_nulls(spark, tmp_path, service):
    spec = _spec(
        tmp_path,
        service,
        "SELECT o.order_id, c.name FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id",
    )
    result = run_both(spec, tmp_path / "runs")
    assert result.stream == result.batch
    assert {r["order_id"]: r["name"] for r in result.stream} == {2: "Ana", 3: "Cho", 4: None, 5: "Ben"}


def test_on_lookup_error_null_emits_nulls_and_the_report_counts_them(spark, tmp_path):
    from expectations.check import run_check
    from jobs.plan import plan_query
    from jobs.spec import load_spec
    from jobs.spec.model import Settings

    with DimensionServer({"customers": CUSTOMERS}, fail_times={"9": 99}) as failing:
        spec = _spec(
            tmp_path,
            failing,
            "SELECT o.order_id, c.name FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id",
        )
        text = yaml.safe_load(spec.read_text())
        text["lookups"]["customers"].update(on_lookup_error="null", retries=0)
        spec.write_text(yaml.safe_dump(text, sort_keys=False))
        result = run_both(spec, tmp_path / "runs")
        report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert {r["order_id"]: r["name"] for r in result.stream}[3] is None  # customer 9 kept failing
    assert report["lookups"]["customers"]["nulls_for_errors"] == 1
    assert report["lookups"]["customers"]["requests"] >= 4


def test_a_dimension_that_changes_between_the_runs_is_a_difference(spark, tmp_path, service):
    from expectations.check import run_check
    from jobs.batch.job import run_batch
    from jobs.plan import plan_query
    from jobs.spec import load_spec
    from jobs.spec.model import Settings

    spec = _spec(
        tmp_path, service, "SELECT o.order_id, c.tier FROM orders o JOIN customers c ON o.customer_id = c.customer_id"
    )
    result = run_both(spec, tmp_path / "runs")
    assert result.stream == result.batch
    service.set("customers", 9, {"customer_id": 9, "name": "Cho", "tier": "platinum"})
    plan = plan_query(load_spec(spec))
    run_batch(plan, Settings(), result.layout)
    report = run_check(plan, Settings(), result.layout).to_json()
    assert report["verdict"] == "fail" and report["mismatched_rows"] == 1
    assert report["differences"]["mismatched"][0]["batch"] == {"tier": "platinum"}
    causes = {c["cause"]: c for c in report["diagnosis"]["causes"]}
    assert list(causes) == ["lookup_changed"] and causes["lookup_changed"]["rows"] == 1
    assert causes["lookup_changed"]["sample"] == [{"order_id": 3, "difference": "different values"}]


@pytest.mark.slow
def test_a_lookup_that_keeps_failing_fails_the_run_with_one_line_naming_key_and_service(tmp_path):
    from tests.integration.test_cli import lockstep

    with DimensionServer({"customers": CUSTOMERS}, fail_times={"8": 99}) as failing:
        spec = _spec(
            tmp_path,
            failing,
            "SELECT o.order_id, c.name FROM orders o JOIN customers c ON o.customer_id = c.customer_id",
        )
        result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("lockstep: error: lookup customers: ")
    assert f"{failing.url}/customers/8 (key customer_id=8)" in last and "after 3 attempts" in last
