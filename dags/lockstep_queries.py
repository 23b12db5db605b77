"""One DAG per query spec in conf/queries: stream >> batch >> check.

The stream task replays the sources' new changelog files into the query's Delta sink, the batch
task computes the same SQL on exactly what the stream consumed, and the check task runs the Great
Expectations suites and fails when the two disagree (the report path is in the task log).

Parsing this file reads the YAML specs only: no Spark, no data. A spec that does not load is
logged as an error and gets no DAG. Environment overrides: LOCKSTEP_QUERIES (specs folder),
LOCKSTEP_RUNS_DIR (runs folder), LOCKSTEP_SETTINGS (settings file).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from airflow.sdk import DAG

from jobs.errors import LockstepError
from jobs.spec import load_settings, load_spec
from operators_lib import LockstepBatchOperator, LockstepCheckOperator, LockstepStreamOperator

PROJECT = Path(__file__).resolve().parents[1]
QUERIES = Path(os.environ.get("LOCKSTEP_QUERIES", PROJECT / "conf" / "queries"))
SETTINGS = Path(os.environ.get("LOCKSTEP_SETTINGS", PROJECT / "conf" / "settings.yaml"))
log = logging.getLogger(__name__)


def runs_dir() -> Path:
    configured = os.environ.get("LOCKSTEP_RUNS_DIR")
    if configured:
        return Path(configured)
    path = load_settings(SETTINGS if SETTINGS.exists() else None).runs_dir
    return path if path.is_absolute() else PROJECT / path


def build_dag(spec_path: Path, runs: Path) -> DAG:
    spec = load_spec(spec_path)
    common = {"spec_path": str(spec_path), "runs_dir": str(runs),
              "settings_path": str(SETTINGS) if SETTINGS.exists() else None}
    with DAG(dag_id=f"lockstep_{spec.name}", schedule=None, catchup=False, max_active_runs=1,
             tags=["lockstep"], description=spec.description or f"lockstep query {spec.name}",
             doc_md=f"{__doc__}\n\nSpec: `{spec_path}`\n\n```sql\n{spec.sql}\n```") as dag:
        stream = LockstepStreamOperator(task_id="stream", **common)
        batch = LockstepBatchOperator(task_id="batch", **common)
        check = LockstepCheckOperator(task_id="check", **common)
        stream >> batch >> check
    return dag


def build_all() -> dict[str, DAG]:
    dags, runs = {}, runs_dir()
    for spec_path in sorted(QUERIES.glob("*.yaml")):
        try:
            dag = build_dag(spec_path, runs)
        except LockstepError as exc:
            log.error("lockstep: no DAG for %s: %s", spec_path, exc)
            continue
        dags[dag.dag_id] = dag
    return dags


globals().update(build_all())
