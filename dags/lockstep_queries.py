"""One DAG per query spec in conf/queries: stream >> batch >> check.

The stream task replays the sources' new changelog files into the query's Delta sink, the batch
task computes the same SQL on exactly what the stream consumed, and the check task runs the Great
Expectations suites and fails when the two disagree (the report path is in the task log).

Each run works on its logical date: a source with `partitioned_by: date` is read up to that
date's partition, and the consistency point and report are kept per date; re-running a date the
stream has moved beyond re-checks it by time travel. The spec's `schedule:` is the DAG's. Runs
of a query are sequential (their stream state is ordered), and every lockstep task takes the one
slot of the `lockstep_spark` pool, so two Spark jobs never share the machine's cores. The stream
task is retried: it resumes from its checkpoint, and a micro-batch already committed to the sink
is skipped, never applied twice.

Parsing this file reads the YAML specs only: no Spark, no data. A spec that does not load is
logged as an error and gets no DAG. Folders and overrides: operators_lib/dag_defaults.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from jobs.errors import LockstepError
from jobs.spec import load_spec
from operators_lib import LockstepBatchOperator, LockstepCheckOperator, LockstepStreamOperator
from operators_lib.dag_defaults import POOL, START, queries_dir, runs_dir, settings_path

log = logging.getLogger(__name__)
STREAM_RETRIES = 2


def build_dag(spec_path: Path, runs: Path) -> DAG:
    spec = load_spec(spec_path)
    settings = settings_path()
    common = {"spec_path": str(spec_path), "runs_dir": str(runs),
              "settings_path": str(settings) if settings else None}
    with DAG(dag_id=f"lockstep_{spec.name}", schedule=spec.schedule, catchup=False, max_active_runs=1,
             start_date=START, tags=["lockstep"], default_args={"pool": POOL},
             params={"rebuild": Param(False, type="boolean",
                                      description="replay every partition up to this date into a fresh "
                                                  "sink, checking each date (after the query changed)")},
             description=spec.description or f"lockstep query {spec.name}",
             doc_md=f"{__doc__}\n\nSpec: `{spec_path}`\n\n```sql\n{spec.sql}\n```") as dag:
        # depends_on_past: a date streams only after the previous date's stream succeeded, so
        # backfill runs and scheduled runs still feed the stream in date order.
        stream = LockstepStreamOperator(task_id="stream", retries=STREAM_RETRIES, depends_on_past=True,
                                        retry_delay=timedelta(seconds=10), **common)
        batch = LockstepBatchOperator(task_id="batch", **common)
        check = LockstepCheckOperator(task_id="check", **common)
        stream >> batch >> check
    return dag


def build_all() -> dict[str, DAG]:
    dags, runs = {}, runs_dir()
    for spec_path in sorted(queries_dir().glob("*.yaml")):
        try:
            dag = build_dag(spec_path, runs)
        except LockstepError as exc:
            log.error("lockstep: no DAG for %s: %s", spec_path, exc)
            continue
        dags[dag.dag_id] = dag
    return dags


globals().update(build_all())
