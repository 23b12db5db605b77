"""The short summary a run prints at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.point import offsets_text
from jobs.runtime.layout import RunLayout
from jobs.runtime.phases import phase_line
from jobs.runtime.progress import counts

if TYPE_CHECKING:  # the report package draws charts with matplotlib: not worth importing here
    from expectations.report.model import Report


def _time_lines(report: Report) -> list[str]:
    """Where the time went: `lockstep run`'s steps, and the check's slowest phases."""
    lines = []
    if report.step_seconds:
        steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in report.step_seconds.items())
        lines.append(f"  time: {steps}")
    if report.check_phases:
        lines.append(f"  the check's time: {phase_line(report.check_phases)}")
    return lines


def verdict_lines(report: Report, layout: RunLayout, store_url: str | None = None) -> str:
    """store_url: the run folder's URL when it is on an object store (layout.root is then this
    host's working copy, which the lines name too)."""
    held = sum(e.success for e in report.expectations)
    head = (
        f"{report.query}: {report.verdict.upper()}  stream {report.stream_rows:,} rows, "
        f"batch {report.batch_rows:,} rows; {held}/{len(report.expectations)} expectations hold"
    )
    lines = [head, f"  output changelog: {counts(report.changelog)}"]
    lines += [f"  WARNING {warning}" for warning in report.warnings]
    if report.diagnosis.get("differing_rows"):
        lines.append(f"  diagnosis: {report.diagnosis['summary']}")
    if not report.passed:
        lines.append(
            f"  differences: {report.missing_rows:,} missing from the stream, "
            f"{report.extra_rows:,} extra in the stream, "
            f"{report.mismatched_rows:,} with different values"
        )
        lines.append(f"  failed: {', '.join(report.failed_expectations)}")
    lines += [f"  not checked: {s['name']} ({s['reason']})" for s in report.skipped_expectations]
    lines += _stage_lines(report)
    lines += _input_lines(report, layout)
    lines += _time_lines(report)
    if store_url:
        lines.append(f"  report: {store_url}/report.html (figures: {store_url}/report.json)")
        lines.append(f"  working copy on this host: {layout.root}")
        return "\n".join(lines)
    lines.append(f"  report: {layout.root / 'report.html'} (figures: {layout.report})")
    lines.append(f"  Data Docs: {layout.root / report.data_docs}")
    return "\n".join(lines)


def _stage_lines(report: Report) -> list[str]:
    lines = []
    for stage in report.stages.stages if report.stages else []:
        state = (
            "agrees"
            if stage["agrees"]
            else (f"DIFFERS ({stage['missing_rows']:,} missing, {stage['extra_rows']:,} extra)")
        )
        lines.append(f"  stage {stage['stage']}: {stage['stream_rows']:,} rows, {state} with its batch equivalent")
    if report.stages and report.stages.first_diverging_stage:
        lines.append(f"  first stage to diverge: {report.stages.first_diverging_stage}")
    if report.materializer:
        lines.append(f"  upsert materializer: {report.materializer['state_rows']:,} live rows held")
    return lines


def _input_lines(report: Report, layout: RunLayout) -> list[str]:
    lines = [
        f"  source {name}: topic {position['topic']} up to offsets {offsets_text(position['offsets'])}"
        for name, position in (report.consistency_point.get("sources") or {}).items()
        if position.get("topic")
    ]
    if report.rows_with_absent_fields:
        lines.append(f"  input rows with a field left out (read as NULL): {report.rows_with_absent_fields:,}")
    if report.quarantined_rows:
        lines.append(f"  quarantined input rows: {report.quarantined_rows:,} (see {layout.quarantine})")
    for name, figures in (report.lookups or {}).items():
        if figures:
            lines.append(
                f"  lookup {name}: {figures['requests']:,} requests, {figures['cache_hits']:,} "
                f"cache hits, {figures['nulls_for_errors']:,} rows given nulls after failing"
            )
    if report.source_anomalies:
        lines.append(
            f"  kept input rows that break the changelog protocol: {report.source_anomalies:,} (see {layout.anomalies})"
        )
    return lines
