"""A broken spec never takes the other queries' DAGs with it: dags/lockstep_queries.py builds
every DAG from the specs folder, and a spec that cannot become one gets a DAG whose only task
fails naming the reason, while every other DAG loads."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import pytest

from tests.conftest import ROOT

GOOD = (ROOT / "conf" / "queries" / "income_per_product.yaml").read_text()


@pytest.fixture
def broken_queries(tmp_path, monkeypatch):
    queries = tmp_path / "queries"
    shutil.copytree(ROOT / "conf" / "queries", queries, ignore=shutil.ignore_patterns("data"))
    (queries / "not_utf8.yaml").write_bytes(GOOD.replace("income_per_product", "a").encode().replace(b"SUM", b"S\xffM"))
    (queries / "unknown_key.yaml").write_text(GOOD.replace("income_per_product", "b") + "colour: red\n")
    (queries / "bad_cron.yaml").write_text(GOOD.replace("income_per_product", "c") + 'schedule: "a b c d e"\n')
    (queries / "no_plan.yaml").write_text(GOOD.replace("income_per_product", "d").replace("SUM(income)", "SUM(incme)"))
    (queries / "twin.yaml").write_text(GOOD)  # the same name as income_per_product.yaml
    monkeypatch.setenv("LOCKSTEP_QUERIES", str(queries))
    return queries


def test_each_broken_spec_is_a_failing_dag_of_its_own_and_every_other_dag_loads(airflow_db, broken_queries):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "lockstep_queries.py"))
    assert bag.import_errors == {}
    invalid = {
        dag_id: dag.get_task("invalid_spec").reason for dag_id, dag in bag.dags.items() if "invalid-spec" in dag.tags
    }
    # Named as the spec's DAG would be; after the file where the spec's name cannot be read.
    assert sorted(invalid) == [
        "lockstep_b",
        "lockstep_c",
        "lockstep_d",
        "lockstep_income_per_product",
        "lockstep_not_utf8",
        "lockstep_twin",
    ]
    assert "not UTF-8 text" in invalid["lockstep_not_utf8"]
    assert "colour: unknown key" in invalid["lockstep_b"]
    assert "a b c d e" in invalid["lockstep_c"]
    assert "unknown column 'incme'" in invalid["lockstep_d"]
    assert "also the name of twin.yaml" in invalid["lockstep_income_per_product"]
    assert "also the name of income_per_product.yaml" in invalid["lockstep_twin"]
    healthy = {f"lockstep_{s.stem}" for s in (ROOT / "conf" / "queries").glob("*.yaml")} - {
        "lockstep_income_per_product"
    }
    assert healthy <= set(bag.dag_ids)
    assert all(sorted(bag.dags[d].task_ids) == ["batch", "check", "stream"] for d in healthy)
    assert bag.dags["lockstep_d"].description.startswith("INVALID SPEC: ")


def test_the_task_of_a_broken_specs_dag_fails_with_the_reason(airflow_db, broken_queries):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags" / "lockstep_queries.py")).get_dag("lockstep_d")
    run = dag.test(logical_date=datetime(2026, 11, 21, tzinfo=UTC))
    assert str(run.state) in ("failed", "DagRunState.FAILED")
    (instance,) = run.get_task_instances()
    assert (instance.task_id, str(instance.state)) in {
        ("invalid_spec", "failed"),
        ("invalid_spec", "TaskInstanceState.FAILED"),
    }


def test_a_removed_spec_takes_its_dag_with_it(airflow_db, tmp_path, monkeypatch):
    from operators_lib.query_dags import query_dags

    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "a.yaml").write_text(GOOD.replace("income_per_product", "a"))
    (queries / "b.yaml").write_text(GOOD.replace("income_per_product", "b"))
    assert sorted(query_dags(queries)) == ["lockstep_a", "lockstep_b"]
    (queries / "b.yaml").unlink()
    assert sorted(query_dags(queries)) == ["lockstep_a"]
    assert not list(ROOT.joinpath("dags").glob("queries/*.py")) and not list(queries.glob("*.py"))
