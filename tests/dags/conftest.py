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
def dag_bag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))
