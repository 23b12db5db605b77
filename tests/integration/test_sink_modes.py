"""Sinks keyed by other columns than the upsert key, and the primary-key violation check."""

import yaml

from expectations.check import run_check
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import run_both


def _seed_003_spec(tmp_path, sink_key):
    spec = {
        "name": "t1",
        "sql": "SELECT s1.*, s2.attr FROM s1 JOIN s2 ON s1.level = s2.id",
        "sources": {
            "s1": {
                "path": "s1",
                "format": "changelog-json",
                "schema": "id BIGINT, level BIGINT",
                "primary_key": ["id"],
            },
            "s2": {"path": "s2", "format": "changelog-json", "schema": "id BIGINT, attr STRING", "primary_key": ["id"]},
        },
        "sink": {"primary_key": sink_key},
        "stream": {"rows_per_batch": 10},
    }
    path = tmp_path / "t1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    write_changelog(
        tmp_path / "s2", "1.json", [{"op": "+I", "id": 10, "attr": "a1"}, {"op": "+I", "id": 20, "attr": "b1"}]
    )
    write_changelog(
        tmp_path / "s1",
        "1.json",
        [
            {"op": "+I", "id": 1, "level": 10},
            {"op": "+I", "id": 2, "level": 20},
            {"op": "-U", "id": 1, "level": 10},
            {"op": "+U", "id": 1, "level": 20},
        ],
    )
    return path


def test_a_sink_key_that_is_not_unique_is_a_primary_key_violation_with_a_sample(spark, tmp_path):
    path = _seed_003_spec(tmp_path, ["level"])
    plan = plan_query(load_spec(path))
    assert plan.materialize
    outcome = run_both(path, tmp_path / "runs")
    report = run_check(plan, Settings(), outcome.layout).to_json()
    assert report["verdict"] == "fail"
    failed = {e["name"] for e in report["expectations"] if not e["success"]}
    assert "expect_no_primary_key_violations" in failed
    assert report["samples"]["expect_no_primary_key_violations"] == [{"level": 20, "distinct_live_rows": 2}]
    assert report["materializer"]["state_rows"] == 2


def test_the_materialized_seed_003_join_passes_its_check(spark, tmp_path):
    path = _seed_003_spec(tmp_path, ["id"])
    plan = plan_query(load_spec(path))
    outcome = run_both(path, tmp_path / "runs")
    assert (
        outcome.stream == outcome.batch == [{"id": 1, "level": 20, "attr": "b1"}, {"id": 2, "level": 20, "attr": "b1"}]
    )
    report = run_check(plan, Settings(), outcome.layout).to_json()
    assert report["verdict"] == "pass", report["samples"]
    assert report["materializer"]["state_rows"] == 2


def test_a_key_built_with_concat_from_group_keys_keeps_one_row_per_student(spark, tmp_path):
    """Seed 003's CONCAT example: the sink key is computed from the group keys, so it is not the
    upsert key; the updated average replaces the first one."""
    spec = {
        "name": "report",
        "sql": (
            "SELECT CONCAT('id:', student_id, ',name:', student_name) AS student_info, avg_score FROM "
            "(SELECT student_id, student_name, AVG(score) AS avg_score FROM students "
            "GROUP BY student_id, student_name) v"
        ),
        "sources": {
            "students": {
                "path": "students",
                "format": "changelog-json",
                "schema": "student_id BIGINT, student_name STRING, course_id BIGINT, score DOUBLE",
                "primary_key": ["student_id", "course_id"],
            }
        },
        "sink": {"primary_key": ["student_info"]},
        "stream": {"rows_per_batch": 1},
    }
    (tmp_path / "report.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    write_changelog(
        tmp_path / "students",
        "1.json",
        [
            {"op": "+I", "student_id": 1, "student_name": "Tom", "course_id": 101, "score": 80.0},
            {"op": "+I", "student_id": 1, "student_name": "Tom", "course_id": 102, "score": 90.0},
        ],
    )
    assert plan_query(load_spec(tmp_path / "report.yaml")).materialize
    outcome = run_both(tmp_path / "report.yaml", tmp_path / "runs")
    assert outcome.stream == outcome.batch == [{"student_info": "id:1,name:Tom", "avg_score": 85.0}]


def test_an_aggregate_over_an_aggregate_runs_as_two_stages(spark, tmp_path):
    write_changelog(
        tmp_path / "orders",
        "001.json",
        [
            change("+I", 1, 1, 5),
            change("+I", 2, 1, 3),
            change("+I", 3, 2, 8),
            change("-D", 2, 1, 3),
            change("+I", 4, 3, 1),
            change("-U", 3, 2, 8),
            change("+U", 3, 1, 8),
        ],
    )
    spec = orders_spec(
        tmp_path,
        "SELECT n, COUNT(*) AS products FROM (SELECT pId, COUNT(*) AS n FROM orders GROUP BY pId) s GROUP BY n",
        rows_per_batch=2,
    )
    assert [s.name for s in plan_query(load_spec(spec)).stages] == ["stage1_aggregate", "q"]
    outcome = run_both(spec, tmp_path / "runs")
    assert outcome.stream == outcome.batch == [{"n": 1, "products": 1}, {"n": 2, "products": 1}]


def test_union_all_into_a_retract_sink_keeps_copies_and_each_side_retracts_its_own(spark, tmp_path):
    spec = {
        "name": "u",
        "sql": "SELECT pId, income FROM a UNION ALL SELECT pId, income FROM b",
        "sources": {
            "a": {
                "path": "a",
                "format": "changelog-json",
                "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
                "primary_key": ["order_id"],
            },
            "b": {"path": "b", "format": "json", "schema": "pId BIGINT, income BIGINT"},
        },
        "sink": {"changelog_mode": "retract"},
        "stream": {"rows_per_batch": 1},
    }
    (tmp_path / "u.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    write_changelog(
        tmp_path / "a",
        "1.json",
        [change("+I", 1, 1, 5), change("+I", 2, 1, 5), change("-D", 2, 1, 5), change("+I", 3, 2, 7)],
    )
    write_changelog(tmp_path / "b", "1.json", [{"pId": 1, "income": 5}, {"pId": 3, "income": 1}])
    outcome = run_both(tmp_path / "u.yaml", tmp_path / "runs")
    assert outcome.stream == [
        {"pId": 1, "income": 5, "__count": 2},
        {"pId": 2, "income": 7, "__count": 1},
        {"pId": 3, "income": 1, "__count": 1},
    ]
    assert outcome.batch == [
        {"pId": 1, "income": 5},
        {"pId": 1, "income": 5},
        {"pId": 2, "income": 7},
        {"pId": 3, "income": 1},
    ]
    report = run_check(plan_query(load_spec(tmp_path / "u.yaml")), Settings(), outcome.layout).to_json()
    assert report["verdict"] == "pass", report["samples"]
