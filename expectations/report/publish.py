"""Write a check's report pages: the latest, its archived copy, and the runs folder's index.

Every file is written to a temporary name and renamed into place, so a reader (a browser, the
index of a check running beside this one) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from expectations.report.index import render_index
from expectations.report.model import SCHEMA_VERSION
from expectations.report.page import render_page
from expectations.report.runs import (
    HISTORY,
    INDEX_HTML,
    REPORT_HTML,
    REPORT_JSON,
    history_dirs,
    query_dirs,
    read_report,
    run_id,
)
from jobs.errors import RunStateError


def publish(report: dict, query_dir: Path) -> Path:
    """report.json and report.html in query_dir and in history/<run_id>/, then the index."""
    query_dir = Path(query_dir)
    archive = query_dir / HISTORY / run_id(report)
    for folder, depth in ((archive, 2), (query_dir, 0)):
        write_atomic(folder / REPORT_JSON, json.dumps(report, indent=1, default=str))
        _write_page(report, folder, depth)
    _write_index(query_dir.parent)
    return query_dir / REPORT_HTML


def publish_error(query: str, description: str, query_dir: Path, error: str, logical_date: str | None = None) -> Path:
    """A run that ended before a verdict (invalid input, a crash): an error report, so the index
    lists the query as ERROR with its reason instead of leaving it out."""
    report = {
        "schema_version": SCHEMA_VERSION,
        "query": query,
        "description": description,
        "verdict": "error",
        "error": error,
        "logical_date": logical_date,
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return publish(report, query_dir)


def rebuild(runs_dir: Path) -> list[Path]:
    """Re-render every report.html (latest and history) from its report.json, and the index."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise RunStateError("no such runs folder (`lockstep run` or `lockstep demo` writes it)", where=str(runs_dir))
    pages = []
    for query_dir in query_dirs(runs_dir):
        if (query_dir / REPORT_JSON).is_file():
            pages.append(_write_page(read_report(query_dir / REPORT_JSON), query_dir, 0))
        pages += [_write_page(read_report(d / REPORT_JSON), d, 2) for d in history_dirs(query_dir)]
    return pages + [_write_index(runs_dir)]


def _write_page(report: dict, folder: Path, depth: int) -> Path:
    """depth: how many folders below the query folder the page is (history/<run_id>/ is 2)."""
    up = "../" * depth
    data_docs = report.get("data_docs")
    html = render_page(
        report, data_docs_href=f"{up}{data_docs}" if data_docs else None, index_href=f"{up}../{INDEX_HTML}"
    )
    return write_atomic(folder / REPORT_HTML, html)


def _write_index(runs_dir: Path) -> Path:
    return write_atomic(runs_dir / INDEX_HTML, render_index(runs_dir))


def write_atomic(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name per process: two checks publishing at once each rename their own file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
