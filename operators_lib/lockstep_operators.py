"""LockstepStreamOperator >> LockstepBatchOperator >> LockstepCheckOperator.

Each returns a small summary (pushed to XCom). An invalid spec, SQL or input fails the task
without retries (retrying cannot fix it); a check whose verdict is "fail" fails the task with the
report's path in the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException


class LockstepOperator(BaseOperator):
    template_fields = ("spec_path", "runs_dir")
    ui_color = "#e8f1fb"

    def __init__(self, *, spec_path: str, runs_dir: str, settings_path: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.runs_dir, self.settings_path = spec_path, runs_dir, settings_path

    def execute(self, context) -> dict:
        from jobs.errors import LockstepError

        try:
            return self.run_step(*self._prepare())
        except LockstepError as exc:
            raise AirflowFailException(f"lockstep: {exc}") from None

    def run_step(self, plan, settings, layout, progress) -> dict:
        raise NotImplementedError

    def _prepare(self):
        from jobs.plan import plan_query
        from jobs.runtime.layout import RunLayout
        from jobs.runtime.progress import Progress
        from jobs.spec import load_settings, load_spec

        settings = load_settings(self.settings_path)
        plan = plan_query(load_spec(self.spec_path))
        layout = RunLayout.for_query(Path(self.runs_dir), plan.spec.name)
        return plan, settings, layout, Progress(emit=self.log.info)


class LockstepStreamOperator(LockstepOperator):
    """Stage the sources' new changelog files and stream them into the Delta sink."""

    def run_step(self, plan, settings, layout, progress) -> dict:
        from jobs.stream.job import run_stream

        result = run_stream(plan, settings, layout, progress)
        return {"micro_batches": result.batches, "input_rows": result.input_rows,
                "sink_version": result.sink_version, "changelog": dict(result.changelog)}


class LockstepBatchOperator(LockstepOperator):
    """Compute the query in batch on exactly what the stream consumed."""

    def run_step(self, plan, settings, layout, progress) -> dict:
        from jobs.batch.job import run_batch

        result = run_batch(plan, settings, layout, progress)
        return {"rows": result.rows, "input_rows": result.input_rows}


class LockstepCheckOperator(LockstepOperator):
    """Run the Great Expectations suites; fail the task when stream and batch disagree."""

    def run_step(self, plan, settings, layout, progress) -> dict:
        from expectations.check import run_check

        report = run_check(plan, settings, layout, progress)
        summary = {key: report[key] for key in ("verdict", "stream_rows", "batch_rows", "missing_rows",
                                                "extra_rows", "mismatched_rows")}
        summary["report"] = str(layout.report)
        if report["verdict"] != "pass":
            failed = [e["name"] for e in report["expectations"] if not e["success"]]
            raise AirflowFailException(f"{plan.spec.name}: stream and batch disagree "
                                       f"({', '.join(failed)}); report: {layout.report}")
        return summary
