"""Where reports live in a runs folder, and reading them back.

runs/index.html                               every query, its latest verdict and its history
runs/<query>/report.json, report.html         the latest check
runs/<query>/history/<run_id>/report.*        every check: run_id is the logical date of a
                                              scheduled run, else from checked_at
"""

from __future__ import annotations

import json
from pathlib import Path

from jobs.errors import RunStateError

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
INDEX_HTML = "index.html"
HISTORY = "history"


def run_id(report: dict) -> str:
    """The logical date ("2026-11-21") of a scheduled run, so a re-run of a date replaces its
    report; else "2026-11-22T18:13:29Z" -> "20261122T181329Z". Both sort by time and are safe
    folder names."""
    if report.get("logical_date"):
        return report["logical_date"]
    checked_at = report.get("checked_at")
    if not checked_at:
        raise RunStateError(
            "report has no checked_at to name its history folder", where=str(report.get("query", "report"))
        )
    return checked_at.replace("-", "").replace(":", "")


def read_report(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunStateError(f"cannot read the report: {exc}", where=str(path)) from None
    if not isinstance(report, dict):
        raise RunStateError("the report is not a JSON object", where=str(path))
    return report


def query_dirs(runs_dir: Path) -> list[Path]:
    """Run folders that hold a report (latest or archived), by name."""
    return sorted(d for d in runs_dir.iterdir() if d.is_dir() and ((d / REPORT_JSON).is_file() or history_dirs(d)))


def history_dirs(query_dir: Path) -> list[Path]:
    """Archived runs, newest first (run ids sort by time)."""
    history = query_dir / HISTORY
    if not history.is_dir():
        return []
    return sorted((d for d in history.iterdir() if (d / REPORT_JSON).is_file()), reverse=True)
