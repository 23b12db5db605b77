"""The bundled demo queries give the results worked out by hand, in both jobs."""

import json
import shutil

import pytest

from expectations.check import run_check
from jobs.cli.main import main
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import ROOT, change, late_event_spec, orders_spec, write_changelog
from tests.integration.conftest import run_both, same_rows


@pytest.fixture
def demo_copy(tmp_path):
    shutil.copytree(ROOT / "conf" / "queries", tmp_path / "queries", ignore=shutil.ignore_patterns("generated"))
    return tmp_path / "queries"


def test_income_per_product_as_in_seed_004_with_updates_and_deletes(spark, demo_copy, tmp_path):
    result = run_both(demo_copy / "income_per_product.yaml", tmp_path / "runs")
    assert result.stream == result.batch == [{"pId": 1, "total": 13}, {"pId": 2, "total": 13}, {"pId": 3, "total": 4}]


def test_customer_stats_over_debezium_recovers_min_and_max_after_retractions(spark, demo_copy, tmp_path):
    result = run_both(demo_copy / "customer_stats.yaml", tmp_path / "runs")
    expected = [
        {
            "customer": "ana",
            "purchases": 3,
            "avg_amount": 10.45 / 3,
            "min_amount": 1.0,
            "max_amount": 7.25,
            "products": 2,
        },
        {"customer": "ben", "purchases": 2, "avg_amount": 2.05, "min_amount": 0.1, "max_amount": 4.0, "products": 1},
        {"customer": "cho", "purchases": 1, "avg_amount": 0.3, "min_amount": 0.3, "max_amount": 0.3, "products": 1},
    ]
    assert same_rows(result.stream, expected) and same_rows(result.batch, expected)


def test_quarantined_rows_are_set_aside_counted_and_the_rest_still_agrees(spark, tmp_path):
    write_changelog(
        tmp_path / "orders", "001.json", [change("+I", 1, 1, 5), change("-D", 7, 1, 5), change("+I", 2, 1, 4)]
    )
    with open(tmp_path / "orders" / "001.json", "a") as f:
        f.write("not json\n")
    spec = orders_spec(
        tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", source={"on_bad_rows": "quarantine"}
    )
    result = run_both(spec, tmp_path / "runs")
    report = run_check(plan_query(load_spec(spec)), Settings(), result.layout).to_json()
    assert report["verdict"] == "pass" and report["quarantined_rows"] == 2
    assert result.stream == [{"pId": 1, "total": 9}]


def test_a_query_that_errors_does_not_stop_the_demo_and_is_listed_as_an_error(spark, tmp_path, capsys):
    queries = tmp_path / "queries"
    write_changelog(queries / "orders", "001.json", [change("+I", 1, 1, 5), change("+I", 2, 2, 4)])
    orders_spec(queries, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", name="a_good")
    orders_spec(queries, "SELECT pId, SUM(incme) AS total FROM orders GROUP BY pId", name="b_bad")
    orders_spec(queries, "SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId", name="c_good")
    code = main(["demo", "--queries", str(queries), "--out", str(tmp_path / "runs"), "--quiet"])
    table = capsys.readouterr().out
    assert code == 2  # something broke: not a disagreement
    assert "a_good" in table and "c_good" in table and table.count("PASS") == 2
    assert "ERROR" in table and "unknown column 'incme'" in table
    bad = json.loads((tmp_path / "runs" / "b_bad" / "report.json").read_text())
    assert bad["verdict"] == "error" and "unknown column 'incme'" in bad["error"] and bad["schema_version"] == 1
    index = (tmp_path / "runs" / "index.html").read_text()
    assert index.count('class="query"') == 3 and "unknown column &#39;incme&#39;" in index


@pytest.mark.slow
def test_the_demo_passes_every_bundled_spec_with_its_generated_data(spark, tmp_path, capsys):
    """`make demo` as a new user runs it, on a copy of conf/queries: the generated changelogs are
    made by the demo itself (smaller), so a spec whose schema disagrees with its data fails here."""
    queries = tmp_path / "queries"
    shutil.copytree(ROOT / "conf" / "queries", queries, ignore=shutil.ignore_patterns("generated"))
    code = main(
        ["demo", "--queries", str(queries), "--out", str(tmp_path / "runs"), "--quiet", "--generated-events", "3000"]
    )
    table = capsys.readouterr().out
    specs = sorted(p.stem for p in queries.glob("*.yaml"))
    rows = {
        line.split()[0]: line.split()[1] for line in table.splitlines() if line.split()[:1] and line.split()[0] in specs
    }
    assert rows == {name: "PASS" for name in specs}, table
    assert code == 0
    assert (queries / "data" / "generated" / "large_orders").is_dir()


@pytest.mark.slow
def test_the_demo_exits_1_when_a_query_disagrees_and_none_errors(spark, tmp_path, capsys):
    queries = tmp_path / "queries"
    write_changelog(queries / "orders", "001.json", [change("+I", 1, 1, 5), change("+I", 2, 2, 4)])
    orders_spec(queries, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId", name="a_good")
    late_event_spec(queries, name="b_late")
    code = main(["demo", "--queries", str(queries), "--out", str(tmp_path / "runs"), "--quiet"])
    table = capsys.readouterr().out
    assert code == 1, table
    verdicts = {line.split()[0]: line.split()[1] for line in table.splitlines() if line.startswith(("a_", "b_"))}
    assert verdicts == {"a_good": "PASS", "b_late": "FAIL"}
