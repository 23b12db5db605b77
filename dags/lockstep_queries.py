"""Keeps one DAG file per query spec: dags/queries/lockstep_<spec>.py for every spec in
conf/queries (LOCKSTEP_QUERIES), each building its DAG (stream >> batch >> check) on its own, so
that a broken spec shows as its own file's import error while every other query's DAG loads.

Airflow parses this file like any other; it defines no DAG itself, writes a query's file when the
spec appears and removes it when the spec goes (operators_lib/query_dags.py). It reads file names
only: no YAML, no Spark.
"""

from __future__ import annotations

from pathlib import Path

from operators_lib.dag_defaults import queries_dir
from operators_lib.query_dags import write_dag_files

QUERY_DAGS = Path(__file__).resolve().parent / "queries"

write_dag_files(queries_dir(), QUERY_DAGS)
