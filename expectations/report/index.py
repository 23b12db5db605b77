"""The index page of a runs folder: every query's latest verdict, and its earlier runs.

Links are relative to runs/index.html, so the folder can be copied or served as it is.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from expectations.report.page import verdict_of
from expectations.report.runs import REPORT_HTML, REPORT_JSON, history_dirs, query_dirs, read_report
from expectations.report.templating import render
from jobs.errors import RunStateError


def render_index(runs_dir: Path) -> str:
    runs_dir = Path(runs_dir)
    return render("index.html.j2", runs_dir=runs_dir.resolve().name, queries=[_query(d) for d in query_dirs(runs_dir)])


def _query(query_dir: Path) -> dict:
    latest = query_dir / REPORT_JSON
    report, problem = _readable(latest) if latest.is_file() else (None, None)
    return {
        "name": query_dir.name,
        "latest": _latest(report, _href(query_dir.name, REPORT_HTML)) if report else None,
        "problem": problem,
        "history": [_run(d, query_dir.name) for d in history_dirs(query_dir)],
    }


def _readable(path: Path) -> tuple[dict | None, str | None]:
    """(report, None), or (None, why not): one broken report.json must not keep a check from
    publishing its own page, so the index shows the problem in that query's row instead."""
    try:
        return read_report(path), None
    except RunStateError as exc:
        return None, str(exc)


def _latest(report: dict, href: str) -> dict:
    diagnosis = report.get("diagnosis") or {}
    return {
        "href": href,
        "verdict": verdict_of(report),
        "reason": reason(report),
        "description": report.get("description") or "",
        "checked_at": report.get("checked_at") or "",
        "stream_rows": report.get("stream_rows"),
        "batch_rows": report.get("batch_rows"),
        # Older reports have no diagnosis: unknown, not zero.
        "unexplained_rows": diagnosis.get("unexplained_rows"),
    }


def _run(run_dir: Path, query: str) -> dict:
    report = _readable(run_dir / REPORT_JSON)[0] or {}
    return {
        "run_id": run_dir.name,
        "verdict": verdict_of(report),
        "checked_at": report.get("checked_at") or "",
        "href": _href(query, "history", run_dir.name, REPORT_HTML),
    }


def reason(report: dict) -> str:
    """Why a run did not pass, in a line: its error, the diagnosis, or the failed expectations."""
    verdict = verdict_of(report)
    if verdict == "error":
        return report.get("error") or "the run ended before a verdict"
    if verdict == "pass":
        return ""
    summary = (report.get("diagnosis") or {}).get("summary")
    failed = [e["name"] for e in report.get("expectations") or [] if not e.get("success")]
    return summary or (f"failed: {', '.join(failed)}" if failed else "the check failed")


def _href(*parts: str) -> str:
    return "/".join(quote(part) for part in parts)
