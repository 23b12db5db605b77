"""The short summary a run prints at the end."""

from __future__ import annotations

from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import counts


def verdict_lines(report: dict, layout: RunLayout) -> str:
    held = sum(e["success"] for e in report["expectations"])
    total = len(report["expectations"])
    head = (f"{report['query']}: {report['verdict'].upper()}  stream {report['stream_rows']:,} rows, "
            f"batch {report['batch_rows']:,} rows; {held}/{total} expectations hold")
    lines = [head, f"  output changelog: {counts(report['changelog'])}"]
    lines += [f"  WARNING {warning}" for warning in report.get("warnings", [])]
    diagnosis = report.get("diagnosis") or {}
    if diagnosis.get("differing_rows"):
        lines.append(f"  diagnosis: {diagnosis['summary']}")
    if report["verdict"] != "pass":
        lines.append(f"  differences: {report['missing_rows']:,} missing from the stream, "
                     f"{report['extra_rows']:,} extra in the stream, "
                     f"{report['mismatched_rows']:,} with different values")
        failed = [e["name"] for e in report["expectations"] if not e["success"]]
        lines.append(f"  failed: {', '.join(failed)}")
    for stage in report.get("stages", []):
        state = "agrees" if stage["agrees"] else (f"DIFFERS ({stage['missing_rows']:,} missing, "
                                                  f"{stage['extra_rows']:,} extra)")
        lines.append(f"  stage {stage['stage']}: {stage['stream_rows']:,} rows, {state} with its batch equivalent")
    if report.get("first_diverging_stage"):
        lines.append(f"  first stage to diverge: {report['first_diverging_stage']}")
    if report.get("materializer"):
        lines.append(f"  upsert materializer: {report['materializer']['state_rows']:,} live rows held")
    if report.get("quarantined_rows"):
        lines.append(f"  quarantined input rows: {report['quarantined_rows']:,} (see {layout.quarantine})")
    for name, figures in (report.get("lookups") or {}).items():
        if figures:
            lines.append(f"  lookup {name}: {figures['requests']:,} requests, {figures['cache_hits']:,} "
                         f"cache hits, {figures['nulls_for_errors']:,} rows given nulls after failing")
    if report.get("source_anomalies"):
        lines.append(f"  kept input rows that break the changelog protocol: {report['source_anomalies']:,} "
                     f"(see {layout.anomalies})")
    lines.append(f"  report: {layout.root / 'report.html'} (figures: {layout.report})")
    lines.append(f"  Data Docs: {layout.root / report['data_docs']}")
    return "\n".join(lines)
