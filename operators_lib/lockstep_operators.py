"""LockstepStreamOperator >> LockstepBatchOperator >> LockstepCheckOperator, and the report DAG's
LockstepReportOperator.

Each returns a small summary (pushed to XCom). An invalid spec, SQL or input fails the task
without retries (retrying cannot fix it); a run folder another process is writing fails it with
the holder named, and the task's retries may find it free; a check whose verdict is "fail" fails the task with the
report's path in the message. A run with a logical date works on that date: the stream reads the
partitions up to it, batch and check use its consistency point (a past date is re-checked by time
travel). Every step is a call on jobs.pipeline.Pipeline, as the command line's.

Where Spark runs: the operator's `master`, else the Airflow Variable `lockstep_spark_master`,
else the Airflow connection `lockstep_spark` (of type `lockstep`, operators_lib/hook.py), else
the settings file's spark.master. `writer` and `engine` override the spec's sink writer and
stream engine the same way (Variables `lockstep_sink_writer`, `lockstep_stream_engine`).

The check task's outlets (set by operators_lib/query_dags.py) are the query's sink as an Asset:
an event is recorded each time a check passes, with the verdict, the logical date and the sink's
Delta version, so downstream DAGs can be scheduled on a certified sink.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from jobs.spec.locations import local_runs_folder, location


class LockstepOperator(BaseOperator):
    template_fields = ("spec_path", "runs_dir", "master", "writer", "engine")
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        spec_path: str,
        runs_dir: str,
        settings_path: str | None = None,
        master: str | None = None,
        writer: str | None = None,
        engine: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.runs_dir, self.settings_path = spec_path, runs_dir, settings_path
        self.master, self.writer, self.engine = master, writer, engine

    def execute(self, context) -> dict:
        from jobs.errors import LockstepError, RunLocked

        logical = context.get("logical_date")
        self.rebuild = bool((context.get("params") or {}).get("rebuild"))
        try:
            return self.run_step(self._pipeline(), logical.date() if logical else None, context)
        except RunLocked as exc:  # another writer holds the run folder: a retry may find it free
            raise AirflowException(f"lockstep: {exc}") from None
        except LockstepError as exc:
            raise AirflowFailException(f"lockstep: {exc}") from None

    def run_step(self, pipeline, logical_date, context) -> dict:
        raise NotImplementedError

    def _pipeline(self):
        from jobs.pipeline import Pipeline
        from jobs.runtime.progress import Progress

        return Pipeline.open(
            self.spec_path,
            settings_path=self.settings_path,
            runs_dir=location(self.runs_dir),
            progress=Progress(emit=self.log.info),
            master=self.master or spark_master_from_airflow(),
            writer=self.writer or _variable(WRITER_VARIABLE),
            engine=self.engine or _variable(ENGINE_VARIABLE),
        )


MASTER_VARIABLE, MASTER_CONNECTION, WRITER_VARIABLE = "lockstep_spark_master", "lockstep_spark", "lockstep_sink_writer"
ENGINE_VARIABLE = "lockstep_stream_engine"
REPORT_URL_VARIABLE = "lockstep_report_base_url"


def spark_master_from_airflow() -> str | None:
    """The Spark master the Airflow deployment names (Variable, then connection); None: the
    settings file's."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    from operators_lib.hook import LockstepHook

    master = _variable(MASTER_VARIABLE)
    if master:
        return master
    try:
        return LockstepHook(MASTER_CONNECTION).spark_master()
    except AirflowNotFoundException:
        return None


def _variable(name: str) -> str | None:
    from airflow.sdk import Variable

    return Variable.get(name, default=None)


class LockstepStreamOperator(LockstepOperator):
    """Stage the sources' new changelog files and stream them into the Delta sink."""

    def run_step(self, pipeline, logical_date, context) -> dict:
        if self.rebuild:  # the DAG's `rebuild` parameter: replay every partition up to this date
            reports = pipeline.rebuild(logical_date)
            failed = [r.logical_date for r in reports if not r.passed]
            if failed:
                raise AirflowFailException(
                    f"{pipeline.plan.spec.name}: rebuild failed at {failed[0]}; the old run folder is back in place"
                )
            return {"rebuilt_dates": [r.logical_date for r in reports]}
        result = pipeline.stream(logical_date)
        if result is None:
            return {"rechecked_by_time_travel": True}
        return {
            "micro_batches": result.batches,
            "input_rows": result.input_rows,
            "sink_version": result.sink_version,
            "changelog": dict(result.changelog),
        }


class LockstepBatchOperator(LockstepOperator):
    """Compute the query in batch on exactly what the stream consumed."""

    def run_step(self, pipeline, logical_date, context) -> dict:
        result = pipeline.batch(logical_date)
        return {"rows": result.rows, "input_rows": result.input_rows}


class ReportLink(BaseOperatorLink):
    """The check task's button to the report page of its run (history/<run id>/report.html: the
    page of this date, kept when later runs replace the latest one), served by lockstep's plugin
    on Airflow's API server (operators_lib/plugin.py), or under the Airflow Variable
    lockstep_report_base_url when another web server serves the runs folder."""

    name = "lockstep report"

    def get_link(self, operator: BaseOperator, *, ti_key) -> str:
        page = getattr(operator, "report_page", None)  # set by execute, on this task object
        if page is None or not isinstance(operator, LockstepOperator):
            return ""
        relative = page.relative_to(Path(operator.runs_dir)).as_posix()
        base = _variable(REPORT_URL_VARIABLE)
        return f"{base.rstrip('/')}/{relative}" if base else plugin_url(relative)


def plugin_url(relative: str) -> str:
    """A runs-folder file as the plugin serves it, under the API server's own path (an Airflow
    behind a reverse proxy at /airflow has its plugin at /airflow/lockstep)."""
    from urllib.parse import urlsplit

    from airflow.configuration import conf

    from operators_lib.dag_defaults import PLUGIN_PREFIX

    base_path = urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return f"{base_path}{PLUGIN_PREFIX}/runs/{relative}"


class LockstepCheckOperator(LockstepOperator):
    """Run the Great Expectations suites; fail the task when stream and batch disagree. The task
    links to its report page (ReportLink)."""

    operator_extra_links = (ReportLink(),)

    def run_step(self, pipeline, logical_date, context) -> dict:
        from expectations.report.runs import HISTORY, REPORT_HTML, run_id

        report = pipeline.check(logical_date)
        self.report_page = pipeline.layout.root / HISTORY / run_id(report.to_json()) / REPORT_HTML
        certified = {
            "verdict": report.verdict,
            "logical_date": report.logical_date,
            "sink_version": report.consistency_point.get("sink_version"),
        }
        for asset in self.outlets:  # recorded by Airflow only when the task succeeds (a pass)
            context["outlet_events"][asset].extra = certified
        summary = {
            "verdict": report.verdict,
            "stream_rows": report.stream_rows,
            "batch_rows": report.batch_rows,
            "missing_rows": report.missing_rows,
            "extra_rows": report.extra_rows,
            "mismatched_rows": report.mismatched_rows,
            "report": str(pipeline.layout.root / "report.html"),
        }
        if not report.passed:
            raise AirflowFailException(
                f"{pipeline.plan.spec.name}: stream and batch disagree "
                f"({', '.join(report.failed_expectations)}); "
                f"{report.diagnosis.get('summary', '')}; report: {summary['report']}"
            )
        return summary


class LockstepReportOperator(BaseOperator):
    """Rebuild every report page and the index of a runs folder; fail, naming them, when any
    query's latest verdict is "fail"."""

    template_fields = ("runs_dir",)
    ui_color = "#fbeee8"

    def __init__(self, *, runs_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runs_dir = runs_dir

    def execute(self, context) -> dict:
        from expectations.report import rebuild
        from expectations.report.runs import INDEX_HTML, REPORT_HTML, REPORT_JSON, query_dirs, read_report
        from jobs.errors import LockstepError

        try:
            runs = local_runs_folder(self.runs_dir)
            pages = rebuild(runs)
            latest = {d.name: read_report(d / REPORT_JSON) for d in query_dirs(runs) if (d / REPORT_JSON).is_file()}
        except LockstepError as exc:
            raise AirflowFailException(f"lockstep: {exc}") from None
        failing = sorted(name for name, report in latest.items() if report.get("verdict") != "pass")
        self.log.info("index: %s (%d pages, %d queries)", runs / INDEX_HTML, len(pages), len(latest))
        if failing:
            raise AirflowFailException(
                f"latest verdict is fail for {len(failing)} of {len(latest)} queries: "
                + "; ".join(f"{name} ({runs / name / REPORT_HTML})" for name in failing)
            )
        return {"index": str(runs / INDEX_HTML), "queries": len(latest), "pages": len(pages)}
