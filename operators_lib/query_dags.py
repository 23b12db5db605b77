"""One DAG per query spec, each in a DAG file of its own.

dags/lockstep_queries.py writes dags/queries/lockstep_<spec>.py for every spec in the queries
folder (and removes the files of specs that are gone); each of those files builds its DAG with
query_dag(). A spec that cannot become a DAG (not UTF-8, an unknown key, a schedule Airflow's
parser refuses, SQL that does not plan, a name another spec has) makes its own file fail to
import, so Airflow lists it among its import errors under that file's name while every other
DAG still loads. Parsing reads YAML and plans SQL: no Spark, no data.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import yaml
from airflow.sdk import DAG, Param

from jobs.errors import SpecError
from jobs.plan import plan_query
from jobs.spec import load_spec
from jobs.spec.model import QuerySpec
from operators_lib.dag_defaults import POOL, START, queries_dir, runs_dir, settings_path
from operators_lib.lockstep_operators import LockstepBatchOperator, LockstepCheckOperator, LockstepStreamOperator

STREAM_RETRIES = 2
DOC = """lockstep query DAG: stream >> batch >> check.

The stream task replays the sources' new changelog files into the query's Delta sink, the batch
task computes the same SQL on exactly what the stream consumed, and the check task runs the Great
Expectations suites and fails when the two disagree (the report path is in the task log).

Each run works on its logical date: a source with `partitioned_by: date` is read up to that
date's partition, and the consistency point and report are kept per date; re-running a date the
stream has moved beyond re-checks it by time travel. Runs of a query are sequential (their stream
state is ordered), and every lockstep task takes the one slot of the `lockstep_spark` pool."""

STUB = '''# Written by dags/lockstep_queries.py for {spec}: do not edit. The query's own airflow DAG file,
# so that a broken spec shows as this file's import error while every other dag still loads.
from operators_lib.query_dags import query_dag

dag = query_dag({spec_file!r})
'''


def query_dag(spec_file: str) -> DAG:
    """The DAG of one spec of the queries folder; a spec that cannot be one raises, naming why."""
    path = queries_dir() / spec_file
    spec = load_spec(path)
    _check_unique_name(spec, path)
    plan_query(spec)  # SQL that does not plan fails here, at parse time, not at run time
    dag = build_dag(spec, path, runs_dir())
    try:
        dag.timetable.validate()  # Airflow's own parser: "a b c d e" looks like a cron, is not one
    except Exception as exc:
        raise SpecError(f"schedule: {exc}", where=str(path)) from None
    return dag


def build_dag(spec: QuerySpec, spec_path: Path, runs: Path) -> DAG:
    settings = settings_path()
    common = {"spec_path": str(spec_path), "runs_dir": str(runs),
              "settings_path": str(settings) if settings else None}
    with DAG(dag_id=f"lockstep_{spec.name}", schedule=spec.schedule, catchup=False, max_active_runs=1,
             start_date=START, tags=["lockstep"], default_args={"pool": POOL},
             params={"rebuild": Param(False, type="boolean",
                                      description="replay every partition up to this date into a fresh "
                                                  "sink, checking each date (after the query changed)")},
             description=spec.description or f"lockstep query {spec.name}",
             doc_md=f"{DOC}\n\nSpec: `{spec_path}`\n\n```sql\n{spec.sql}\n```") as dag:
        # depends_on_past: a date streams only after the previous date's stream succeeded, so
        # backfill runs and scheduled runs still feed the stream in date order.
        stream = LockstepStreamOperator(task_id="stream", retries=STREAM_RETRIES, depends_on_past=True,
                                        retry_delay=timedelta(seconds=10), **common)
        batch = LockstepBatchOperator(task_id="batch", **common)
        check = LockstepCheckOperator(task_id="check", **common)
        stream >> batch >> check
    return dag


def write_dag_files(queries: Path, folder: Path) -> list[Path]:
    """One DAG file per spec in `folder`, rewritten only when it would change; the files of
    specs that are gone are removed. Returns the files."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {f"lockstep_{p.stem}.py": STUB.format(spec=p.name, spec_file=p.name)
              for p in sorted(queries.glob("*.yaml"))}
    for stale in set(p.name for p in folder.glob("lockstep_*.py")) - set(wanted):
        (folder / stale).unlink(missing_ok=True)
    for name, text in wanted.items():
        _write_if_changed(folder / name, text)
    return [folder / name for name in wanted]


def _check_unique_name(spec: QuerySpec, path: Path) -> None:
    """Two specs with one name would be one DAG: each names the other."""
    for other in sorted(path.parent.glob("*.yaml")):
        if other != path and _name_in(other) == spec.name:
            raise SpecError(f"name {spec.name!r} is also the name of {other.name}: each query needs its own",
                            where=str(path))


def _name_in(path: Path) -> str | None:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None  # that spec's own DAG file says what is wrong with it
    return data.get("name") if isinstance(data, dict) else None


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # DAG files are parsed in parallel
    tmp.write_text(text)
    os.replace(tmp, path)
