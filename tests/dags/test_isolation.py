"""A broken spec never takes the other queries' DAGs with it: each spec has its own DAG file, so
Airflow lists a broken one among its import errors under that file's name, with the reason."""

from __future__ import annotations

import shutil

from tests.conftest import ROOT

GOOD = (ROOT / "conf" / "queries" / "income_per_product.yaml").read_text()


def test_each_broken_spec_is_its_own_import_error_and_every_other_dag_loads(airflow_db, tmp_path, monkeypatch):
    queries = tmp_path / "queries"
    shutil.copytree(ROOT / "conf" / "queries", queries, ignore=shutil.ignore_patterns("data"))
    (queries / "not_utf8.yaml").write_bytes(GOOD.replace("income_per_product", "a").encode().replace(b"SUM", b"S\xffM"))
    (queries / "unknown_key.yaml").write_text(GOOD.replace("income_per_product", "b") + "colour: red\n")
    (queries / "bad_cron.yaml").write_text(GOOD.replace("income_per_product", "c") + 'schedule: "a b c d e"\n')
    (queries / "no_plan.yaml").write_text(GOOD.replace("income_per_product", "d").replace("SUM(income)", "SUM(incme)"))
    (queries / "twin.yaml").write_text(GOOD)  # the same name as income_per_product.yaml
    monkeypatch.setenv("LOCKSTEP_QUERIES", str(queries))
    from airflow.dag_processing.dagbag import DagBag
    from operators_lib.query_dags import write_dag_files

    folder = tmp_path / "dags"
    write_dag_files(queries, folder)
    bag = DagBag(dag_folder=str(folder))
    errors = {name.split("/")[-1]: text.strip().splitlines()[-1] for name, text in bag.import_errors.items()}
    assert sorted(errors) == ["lockstep_bad_cron.py", "lockstep_income_per_product.py", "lockstep_no_plan.py",
                              "lockstep_not_utf8.py", "lockstep_twin.py", "lockstep_unknown_key.py"]
    assert "not UTF-8 text" in errors["lockstep_not_utf8.py"]
    assert "colour: unknown key" in errors["lockstep_unknown_key.py"]
    assert "a b c d e" in errors["lockstep_bad_cron.py"]
    assert "unknown column 'incme'" in errors["lockstep_no_plan.py"]
    assert "also the name of twin.yaml" in errors["lockstep_income_per_product.py"]
    assert "also the name of income_per_product.yaml" in errors["lockstep_twin.py"]
    healthy = {f"lockstep_{s.stem}" for s in (ROOT / "conf" / "queries").glob("*.yaml")} - {"lockstep_income_per_product"}
    assert healthy <= set(bag.dag_ids)


def test_a_removed_spec_takes_its_dag_file_with_it(tmp_path):
    from operators_lib.query_dags import write_dag_files

    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "a.yaml").write_text(GOOD)
    (queries / "b.yaml").write_text(GOOD)
    assert [p.name for p in write_dag_files(queries, tmp_path / "dags")] == ["lockstep_a.py", "lockstep_b.py"]
    (queries / "b.yaml").unlink()
    write_dag_files(queries, tmp_path / "dags")
    assert sorted(p.name for p in (tmp_path / "dags").glob("*.py")) == ["lockstep_a.py"]
