"""report.json as a typed object: the check builds one Report, and it is serialised once.

The JSON keeps the flat shape report.json has always had (the pages read older reports too):
optional sections (windows, stages, the materializer, lookups) are left out when the query has
none. Sections that other modules compute (the diagnosis, the differences side by side, the
consistency point, the micro-batches) stay plain JSON-ready values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# report.json's shape: raised when a key is renamed or removed, or changes meaning; a key added
# keeps it. Reports without the key are version 1.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ExpectationOutcome:
    suite: str
    name: str
    success: bool
    unexpected_rows: int | None  # rows its query returned (lockstep's own expectations)
    sample: tuple[dict, ...] = ()  # the first of them, for a failed expectation

    def to_json(self) -> dict:
        return {
            "suite": self.suite,
            "name": self.name,
            "success": self.success,
            "unexpected_rows": self.unexpected_rows,
        }


@dataclass(frozen=True)
class WindowFigures:
    final_watermark: str | None
    end_of_input: str  # what the end of the input did to the windows
    open_windows: int  # emit: final: windows still open, compared as the stream holds them
    late_events: int
    late_events_by_window: list[dict]
    late_explanation: dict | None = None

    def to_json(self) -> dict:
        figures: dict[str, Any] = {
            "final_watermark": self.final_watermark,
            "end_of_input": self.end_of_input,
            "open_windows": self.open_windows,
            "late_events": self.late_events,
            "late_events_by_window": self.late_events_by_window,
        }
        if self.late_explanation is not None:
            figures["late_explanation"] = self.late_explanation
        return figures


@dataclass(frozen=True)
class StageFigures:
    stages: list[dict]  # per intermediate stage: rows on each side, missing, extra, agrees
    first_diverging_stage: str | None

    def to_json(self) -> dict:
        return {"stages": self.stages, "first_diverging_stage": self.first_diverging_stage}


@dataclass(frozen=True)
class Report:
    query: str
    description: str
    verdict: str  # "pass" when every expectation holds, else "fail"
    warnings: tuple[str, ...]
    stream_rows: int
    batch_rows: int
    missing_rows: int
    extra_rows: int
    mismatched_rows: int
    changelog: dict[str, int]  # the sink's change feed up to the point: +I, -U, +U, -D
    expectations: tuple[ExpectationOutcome, ...]
    consistency_point: dict
    quarantined_rows: int
    source_anomalies: int
    rows_with_absent_fields: int  # staged with a nullable field left out of their JSON (as NULL)
    micro_batches: list[dict]
    sink: dict
    data_docs: str
    plan: str
    checked_at: str
    diagnosis: dict
    differences: dict
    check_seconds: float
    logical_date: str | None
    rechecked_by_time_travel: bool
    windows: WindowFigures | None = None
    stages: StageFigures | None = None
    materializer: dict | None = None
    lookups: dict | None = None
    skipped_expectations: tuple[dict, ...] = ()  # {suite, name, reason}: what could not be checked
    # late_events, quarantined, anomalies: {"table", "total", "rows"}, the first rows of each
    listed_rows: dict | None = None
    # Where the check's time went: {phase: {"seconds", "spark_jobs"}} (jobs/runtime/phases.py)
    check_phases: dict | None = None
    # `lockstep run`'s steps, {"stream", "batch", "check"}: seconds each, when one run made them
    step_seconds: dict | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def failed_expectations(self) -> list[str]:
        return [e.name for e in self.expectations if not e.success]

    def to_json(self) -> dict:
        data = {
            "schema_version": SCHEMA_VERSION,
            "query": self.query,
            "description": self.description,
            "verdict": self.verdict,
            "warnings": list(self.warnings),
            "stream_rows": self.stream_rows,
            "batch_rows": self.batch_rows,
            "missing_rows": self.missing_rows,
            "extra_rows": self.extra_rows,
            "mismatched_rows": self.mismatched_rows,
            "changelog": self.changelog,
            "expectations": [e.to_json() for e in self.expectations],
            "samples": {e.name: list(e.sample) for e in self.expectations if not e.success and e.sample},
            "consistency_point": self.consistency_point,
            "quarantined_rows": self.quarantined_rows,
            "source_anomalies": self.source_anomalies,
            "rows_with_absent_fields": self.rows_with_absent_fields,
            "micro_batches": self.micro_batches,
            "sink": self.sink,
            "data_docs": self.data_docs,
            "plan": self.plan,
            "checked_at": self.checked_at,
            "skipped_expectations": list(self.skipped_expectations),
            "listed_rows": self.listed_rows or {},
        }
        for section in (self.windows, self.stages):
            if section is not None:
                data.update(section.to_json())
        if self.materializer is not None:
            data["materializer"] = self.materializer
        data.update({"diagnosis": self.diagnosis, "differences": self.differences})
        if self.lookups is not None:
            data["lookups"] = self.lookups
        data.update(
            {
                "check_seconds": self.check_seconds,
                "check_phases": self.check_phases or {},
                "step_seconds": self.step_seconds or {},
                "logical_date": self.logical_date,
                "rechecked_by_time_travel": self.rechecked_by_time_travel,
            }
        )
        return data
