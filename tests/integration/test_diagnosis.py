"""The check attributes each differing row to a cause: a difference of each kind is planted and
must come out under the right cause in report.json, with "unexplained" first when present."""

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import run_both
from tests.integration.test_sink_modes import _seed_003_spec
from tests.integration.test_stages import DEDUP_THEN_AGGREGATE, EVENTS
from tests.integration.test_windows import late_case

PER_PRODUCT = "SELECT pId, COUNT(*) AS n, SUM(income) AS total FROM orders GROUP BY pId"


def check(spec, outcome) -> dict:
    return run_check(plan_query(load_spec(spec)), Settings(), outcome.layout).to_json()


def causes(report: dict) -> dict[str, int]:
    return {c["cause"]: c["rows"] for c in report["diagnosis"]["causes"]}


def test_agreeing_results_have_no_causes(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, PER_PRODUCT)
    report = check(spec, run_both(spec, tmp_path / "runs"))
    assert report["diagnosis"]["differing_rows"] == 0 and report["diagnosis"]["causes"] == []
    assert report["warnings"] == [] and "GroupAggregate" in report["plan"]


def test_source_anomalies_explain_their_groups_and_a_tampered_row_is_unexplained(spark, tmp_path):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 5),
            change("+I", 2, 2, 3),
            change("-D", 9, 3, 4),  # retracts an order never inserted
            change("+I", 10, 3, 7),
            change("+I", 4, 4, 2),
            change("+U", 4, 5, 6),
        ],
    )  # an update without its before-image
    spec = orders_spec(tmp_path, PER_PRODUCT, source={"on_bad_rows": "keep"})
    outcome = run_both(spec, tmp_path / "runs")
    # The stream took the ghost -D: product 3 counts 1 - 1 = 0 orders, and has no row.
    assert 3 not in {r["pId"] for r in outcome.stream} and 3 in {r["pId"] for r in outcome.batch}
    # A row the batch job got wrong for no known reason: product 1.
    DeltaTable(str(outcome.layout.batch)).update(predicate="pId = 1", updates={"total": "total + 1"})
    report = check(spec, outcome)
    assert report["source_anomalies"] == 2
    listed = report["listed_rows"]["anomalies"]  # the rows themselves, by file and line
    assert listed["table"] == "anomalies" and listed["total"] == 2
    assert [(r["file"].rsplit("/", 1)[-1], r["line"]) for r in listed["rows"]] == [("001.json", 3), ("001.json", 6)]
    assert causes(report) == {"unexplained": 1, "source_anomalies": 1}
    first, second = report["diagnosis"]["causes"]
    assert first["cause"] == "unexplained" and first["sample"] == [{"pId": 1, "difference": "different values"}]
    assert second["sample"] == [{"pId": 3, "difference": "missing from the stream"}]
    assert "-D" in second["detail"] and "+U" in second["detail"]
    mismatched = report["differences"]["mismatched"]
    assert mismatched == [
        {"key": {"pId": 1}, "stream": {"n": 1, "total": 5}, "batch": {"n": 1, "total": 6}, "differing": ["total"]}
    ]
    assert report["diagnosis"]["summary"] == "2 rows differ: 1 unexplained; 1 explained by source changelog anomalies"
    page = (outcome.layout.root / "report.html").read_text()
    assert page.index("Unexplained") < page.index("Source changelog anomalies")
    assert page.index('<section id="anomalies">') < page.index('<section id="run">')
    assert report["diagnosis"]["summary"] in page


def test_late_events_explain_the_windows_they_missed(spark, tmp_path):
    spec = late_case(tmp_path)
    report = check(spec, run_both(spec, tmp_path / "runs"))
    assert causes(report) == {"late_events": 1}
    assert report["diagnosis"]["causes"][0]["sample"][0]["pId"] == 1


def test_a_non_deterministic_query_gets_every_difference(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:3])
    spec = orders_spec(tmp_path, "SELECT order_id, income * rand() AS r FROM orders")
    report = check(spec, run_both(spec, tmp_path / "runs"))
    assert report["verdict"] == "fail"
    assert causes(report) == {"non_deterministic": 3}
    assert "non-deterministic function RAND()" in report["warnings"][0]
    assert report["warnings"][0] in report["diagnosis"]["causes"][0]["detail"]


def test_a_primary_key_violation_explains_the_keys_it_breaks(spark, tmp_path):
    path = _seed_003_spec(tmp_path, ["level"])
    report = check(path, run_both(path, tmp_path / "runs"))
    assert set(causes(report)) == {"primary_key_violation"}
    assert {r["level"] for r in report["diagnosis"]["causes"][0]["sample"]} == {20}


def test_a_stage_that_diverged_explains_the_final_difference(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:6])
    spec = orders_spec(tmp_path, DEDUP_THEN_AGGREGATE, rows_per_batch=2)
    outcome = run_both(spec, tmp_path / "runs")
    # The dedup stage's table gains an order for product 7 that no input has; the aggregate
    # stage reads it from the change feed when the next input arrives.
    stage = DeltaTable(str(outcome.layout.stage_table("stage1_dedup")))
    rows = stage.to_pyarrow_table()
    bogus = {**rows.to_pylist()[0], "order_id": 99, "pId": 7}
    write_deltalake(stage, pa.Table.from_pylist([bogus], schema=rows.schema), mode="append")
    write_changelog(tmp_path / "orders", "002.json", EVENTS[6:])
    report = check(spec, run_both(spec, tmp_path / "runs"))
    assert report["first_diverging_stage"] == "stage1_dedup"
    assert set(causes(report)) == {"diverging_stage"}
    assert "stage1_dedup" in report["diagnosis"]["causes"][0]["detail"]
