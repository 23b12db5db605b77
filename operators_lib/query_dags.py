"""One DAG per query spec, built from the specs folder at parse time, writing nothing.

dags/lockstep_queries.py calls query_dags() and Airflow picks the DAGs up from its module. A spec
that cannot become a DAG (not UTF-8, an unknown key, a schedule Airflow's parser refuses, SQL
that does not plan, a name another spec has) costs only its own DAG: it becomes a DAG of the same
id with a single task, `invalid_spec`, that fails naming the reason (its description says it too,
and the reason is logged when the file is parsed), while every other query's DAG loads as usual.
Parsing reads YAML and plans SQL: no Spark, no data.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from airflow.sdk import DAG, Asset, BaseOperator, Param
from airflow.sdk.exceptions import AirflowFailException

from jobs.errors import SpecError, one_line
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec
from jobs.spec.model import QuerySpec
from operators_lib.dag_defaults import POOL, START, queries_dir, runs_dir, settings_path
from operators_lib.lockstep_operators import LockstepBatchOperator, LockstepCheckOperator, LockstepStreamOperator

log = logging.getLogger(__name__)
STREAM_RETRIES = 2
DOC = """lockstep query DAG: stream >> batch >> check.

The stream task replays the sources' new changelog files into the query's Delta sink, the batch
task computes the same SQL on exactly what the stream consumed, and the check task runs the Great
Expectations suites and fails when the two disagree (the report is the task's extra link).

Each run works on its logical date: a source with `partitioned_by: date` is read up to that
date's partition, and the consistency point and report are kept per date; re-running a date the
stream has moved beyond re-checks it by time travel. Runs of a query are sequential (their stream
state is ordered), and every lockstep task takes the one slot of the `lockstep_spark` pool. A
passing check records an event on the sink's Asset (`lockstep.<query>`)."""


def query_dags(queries: Path | None = None) -> dict[str, DAG]:
    """Every spec's DAG by id: the query's own, or, for a spec that cannot be one, a DAG whose
    task fails naming why."""
    queries = queries or queries_dir()
    runs = runs_dir()
    dags: dict[str, DAG] = {}
    for path in sorted(queries.glob("*.yaml")):
        try:
            dag = query_dag(path, runs)
        except Exception as exc:  # any failure of one spec stays with that spec
            log.error("lockstep: %s cannot become a DAG: %s", path, one_line(exc))
            dag = invalid_spec_dag(path, one_line(exc), _free_id(path, dags))
        if dag.dag_id in dags:
            log.error("lockstep: %s: DAG id %s is taken by another spec", path, dag.dag_id)
            continue
        dags[dag.dag_id] = dag
    return dags


def _free_id(path: Path, taken: dict) -> str:
    """The id the spec's DAG would have, so its history stays in view; the file's name when the
    spec names no query or another spec has that name."""
    named = f"lockstep_{_name_in(path)}"
    return named if _name_in(path) and named not in taken else f"lockstep_{path.stem}"


def query_dag(path: Path, runs: Path | str) -> DAG:
    """The DAG of one spec; a spec that cannot be one raises, naming why."""
    spec = load_spec(path)
    _check_unique_name(spec, path)
    plan_query(spec)  # SQL that does not plan fails here, at parse time, not at run time
    dag = build_dag(spec, path, runs)
    try:
        dag.timetable.validate()  # Airflow's own parser: "a b c d e" looks like a cron, is not one
    except Exception as exc:
        raise SpecError(f"schedule: {exc}", where=str(path)) from None
    return dag


def sink_asset(spec: QuerySpec, runs: Path | str) -> Asset:
    """The query's certified sink, as downstream DAGs schedule on it (`Asset.ref(name=
    "lockstep.<q>")`). Its URI names the query, not the folder: a runs folder moved elsewhere
    is still the same asset (Airflow refuses a second active asset of one name with another
    URI); the Delta table's location is in the asset's extra."""
    table = (
        f"{runs.rstrip('/')}/{spec.name}/stream"
        if isinstance(runs, str)
        else RunLayout.for_query(runs, spec.name).stream.resolve().as_uri()
    )
    return Asset(
        name=f"lockstep.{spec.name}",
        uri=f"lockstep://{spec.name}/sink",
        group="lockstep",
        extra={"table": table, "format": "delta"},
    )


def build_dag(spec: QuerySpec, spec_path: Path, runs: Path | str) -> DAG:
    settings = settings_path()
    common: dict[str, Any] = {
        "spec_path": str(spec_path),
        "runs_dir": str(runs),
        "settings_path": str(settings) if settings else None,
    }
    # auto_register off: a DAG is the module's only by being returned, never half-built.
    with DAG(
        dag_id=f"lockstep_{spec.name}",
        schedule=spec.schedule,
        catchup=False,
        max_active_runs=1,
        start_date=START,
        tags=["lockstep"],
        default_args={"pool": POOL},
        auto_register=False,
        params={
            "rebuild": Param(
                False,
                type="boolean",
                description="replay every partition up to this date into a fresh "
                "sink, checking each date (after the query changed)",
            )
        },
        description=spec.description or f"lockstep query {spec.name}",
        doc_md=f"{DOC}\n\nSpec: `{spec_path}`\n\n```sql\n{spec.sql}\n```",
    ) as dag:
        # depends_on_past: a date streams only after the previous date's stream succeeded, so
        # backfill runs and scheduled runs still feed the stream in date order.
        stream = LockstepStreamOperator(
            task_id="stream", retries=STREAM_RETRIES, depends_on_past=True, retry_delay=timedelta(seconds=10), **common
        )
        batch = LockstepBatchOperator(task_id="batch", **common)
        check = LockstepCheckOperator(task_id="check", outlets=[sink_asset(spec, runs)], **common)
        stream >> batch >> check
    return dag


class InvalidSpecOperator(BaseOperator):
    """Fails with the reason its spec cannot become a DAG."""

    ui_color = "#f8d7da"

    def __init__(self, *, reason: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def execute(self, context) -> None:
        raise AirflowFailException(f"lockstep: invalid spec: {self.reason}")


def invalid_spec_dag(path: Path, reason: str, dag_id: str) -> DAG:
    """A DAG for a spec that cannot be one; it runs only when asked."""
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=START,
        catchup=False,
        tags=["lockstep", "invalid-spec"],
        auto_register=False,
        description=f"INVALID SPEC: {reason}"[:1000],
        doc_md=f"The spec `{path}` cannot become a lockstep DAG:\n\n    {reason}\n",
    ) as dag:
        InvalidSpecOperator(task_id="invalid_spec", reason=reason)
    return dag


def _check_unique_name(spec: QuerySpec, path: Path) -> None:
    """Two specs with one name would be one DAG: each names the other."""
    for other in sorted(path.parent.glob("*.yaml")):
        if other != path and _name_in(other) == spec.name:
            raise SpecError(
                f"name {spec.name!r} is also the name of {other.name}: each query needs its own", where=str(path)
            )


def _name_in(path: Path) -> str | None:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None  # that spec's own DAG says what is wrong with it
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name.isidentifier() else None
