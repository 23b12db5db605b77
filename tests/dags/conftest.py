"""Airflow for the DAG tests: a SQLite metadata database under state/test-airflow, created once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="session")
def airflow_db():
    home = Path(os.environ["AIRFLOW_HOME"])
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    from airflow.utils import db

    db.initdb()
    return home


@pytest.fixture
def query_dag_files():
    """One DAG file per spec of conf/queries in dags/queries (what dags/lockstep_queries.py keeps
    up to date while Airflow runs; a DagBag lists the folder before it parses that file)."""
    from operators_lib.query_dags import write_dag_files

    return write_dag_files(ROOT / "conf" / "queries", ROOT / "dags" / "queries")


@pytest.fixture
def dag_bag(airflow_db, query_dag_files):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))
