"""One check run as one self-contained HTML page (inline CSS and SVG; no script, no network).

The page answers in the order a reader asks: do stream and batch agree, why not, which rows,
how the stream got there (changelog, state), what the suites checked, and the plan. Every
optional report field may be missing: reports written by older versions still render.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from functools import lru_cache

from markupsafe import Markup

from expectations.listed_rows import time_text
from expectations.report import charts
from expectations.report.diff import differences
from expectations.report.tables import cell, figure, rows_table
from expectations.report.templating import render
from jobs.point import offsets_text

UNEXPLAINED = "unexplained"
COUNTS = [
    ("stream_rows", "stream rows"),
    ("batch_rows", "batch rows"),
    ("missing_rows", "missing from stream"),
    ("extra_rows", "extra in stream"),
    ("mismatched_rows", "mismatched values"),
]


def render_page(report: dict, *, data_docs_href: str | None, index_href: str | None = None) -> str:
    return render(
        "page.html.j2",
        title=report.get("query", "lockstep report"),
        description=report.get("description"),
        checked_at=report.get("checked_at"),
        verdict=verdict_of(report),
        explanation=explanation(report),
        warnings=[str(w) for w in report.get("warnings") or []],
        diagnosis=_diagnosis(report.get("diagnosis")),
        counts=_counts(report),
        differences=differences(report),
        changelog=_changelog(report),
        suites=_suites(report),
        data_docs_href=data_docs_href,
        index_href=index_href,
        stages=_stages(report),
        materializer=report.get("materializer"),
        windows=_windows(report),
        run=_run_figures(report),
        plan=report.get("plan"),
        listed=_listed(report),
    )


def verdict_of(report: dict) -> str:
    """pass, fail, or error (the run ended before a verdict)."""
    verdict = report.get("verdict")
    return verdict if verdict in ("pass", "error") else "fail"


def explanation(report: dict) -> str:
    """The sentence under the verdict: the error, the check's own, the diagnosis', or from the counts."""
    if report.get("verdict") == "error":
        return f"The run ended before a verdict: {report.get('error') or 'no reason recorded'}"
    diagnosis = report.get("diagnosis") or {}
    return report.get("explanation") or diagnosis.get("summary") or _from_counts(report)


def _from_counts(report: dict) -> str:
    expectations = report.get("expectations") or []
    failed = [e["name"] for e in expectations if not e.get("success")]
    held = f"{len(expectations) - len(failed)} of {len(expectations)} expectations hold"
    if report.get("verdict") == "pass":
        return f"Stream and batch agree: {report.get('stream_rows') or 0:,} rows on each side; {held}."
    differing = [f"{report[field]:,} {label}" for field, label in COUNTS[2:] if report.get(field)]
    if differing:
        return f"Stream and batch disagree: {', '.join(differing)}; {held}."
    if failed:
        return f"Stream and batch hold the same rows, but {held}: {', '.join(failed)} failed."
    return "The check failed; this report does not say which expectation (see the Data Docs)."


def _diagnosis(diagnosis: dict | None) -> dict | None:
    if not diagnosis:
        return None
    causes = [
        {
            **cause,
            "sample": rows_table(cause.get("sample") or []),
            "highlight": cause.get("cause") == UNEXPLAINED and (cause.get("rows") or 0) > 0,
        }
        for cause in diagnosis.get("causes") or []
    ]
    # Rows nothing explains are the ones to look at first.
    causes.sort(key=lambda cause: not cause["highlight"])
    figures = [
        (label, figure(diagnosis[field]))
        for field, label in [
            ("differing_rows", "differing rows"),
            ("explained_rows", "explained"),
            ("unexplained_rows", "unexplained"),
        ]
        if field in diagnosis
    ]
    return {"causes": causes, "figures": figures}


def _counts(report: dict) -> list[dict]:
    return [
        {"label": label, "value": figure(report.get(field)), "bad": index >= 2 and bool(report.get(field))}
        for index, (field, label) in enumerate(COUNTS)
    ]


def _changelog(report: dict) -> dict:
    batches = [b for b in report.get("micro_batches") or [] if isinstance(b, dict) and "batch" in b]
    totals = report.get("changelog") or {}
    return {
        "totals": [(kind, figure(count)) for kind, count in totals.items()],
        "charts": _charts(json.dumps(batches, sort_keys=True, default=str)) if batches else (),
        "batches": rows_table([_batch_row(b) for b in batches]),
    }


@lru_cache(maxsize=16)
def _charts(batches_json: str) -> tuple[Markup, ...]:
    # Drawing is most of a page's rendering time, and publish() renders each report twice (the
    # latest page and its archived copy) with the same micro-batches.
    batches = json.loads(batches_json)
    drawn = [Markup(charts.changelog_chart(batches))]
    if any(batch.get("state_rows") is not None for batch in batches):  # a stateless query has none
        drawn.append(Markup(charts.state_chart(batches)))
    return tuple(drawn)


def _batch_row(batch: dict) -> dict:
    changes = batch.get("changelog") or {}
    return {
        "micro-batch": batch["batch"],
        "changelog rows": batch.get("rows"),
        **{kind: changes.get(kind, 0) for kind in ("+I", "-U", "+U", "-D")},
        "state rows": batch.get("state_rows"),
        "seconds": batch.get("seconds"),
        "replayed": batch.get("replayed", False),
    }


def _suites(report: dict) -> list[dict]:
    """Expectations grouped by suite in the order the check ran them, failed ones with samples."""
    samples = report.get("samples") or {}
    grouped = defaultdict(list)
    for expectation in report.get("expectations") or []:
        grouped[expectation.get("suite", "")].append(
            {
                **expectation,
                "unexpected": figure(expectation.get("unexpected_rows")),
                "sample": rows_table(samples.get(expectation.get("name")) or []),
            }
        )
    return [
        {"name": suite, "expectations": items, "held": sum(bool(e.get("success")) for e in items)}
        for suite, items in grouped.items()
    ]


def _stages(report: dict) -> dict | None:
    stages = report.get("stages")
    if not stages:
        return None
    first = report.get("first_diverging_stage")
    return {"first": first, "rows": [{**stage, "diverges": stage.get("stage") == first} for stage in stages]}


def _windows(report: dict) -> dict | None:
    if not any(field in report for field in ("final_watermark", "late_events", "late_explanation")):
        return None
    figures = [
        (label, figure(report[field]))
        for field, label in [
            ("final_watermark", "final watermark"),
            ("end_of_input", "end of input"),
            ("open_windows", "open windows (compared as the stream holds them)"),
            ("late_events", "late events"),
            ("open_windows_not_compared", "open windows not compared"),
        ]
        if field in report
    ]
    return {
        "figures": figures,
        "by_window": rows_table(report.get("late_events_by_window") or []),
        "explanation": (report.get("late_explanation") or {}).get("summary"),
    }


def _run_figures(report: dict) -> dict:
    point = report.get("consistency_point") or {}
    sink = report.get("sink") or {}
    sources = [
        {"source": name, **_readable_position(figures)} for name, figures in (point.get("sources") or {}).items()
    ]
    figures = [
        ("sink version", point.get("sink_version")),
        ("quarantined rows", report.get("quarantined_rows")),
        ("source anomalies", report.get("source_anomalies")),
        ("rows with a field left out (NULL)", report.get("rows_with_absent_fields")),
    ]
    return {
        "figures": [(label, figure(value)) for label, value in figures if value is not None],
        "sources": rows_table(sources),
        "sink": [
            (label, cell(sink[field]))
            for field, label in [("path", "path"), ("primary_key", "primary key"), ("version", "version")]
            if field in sink
        ],
        "check_seconds": report.get("check_seconds"),
    }


def _readable_position(figures: dict) -> dict:
    """A source's position as a reader reads it: the watermark as a time, a topic's offsets as
    "partition: offset" pairs."""
    readable = dict(figures)
    if "watermark" in figures:
        readable["watermark"] = _utc(figures["watermark"])
    if "offsets" in figures:
        readable["offsets"] = offsets_text(figures["offsets"])
    return readable


def _utc(micros: int | None) -> str | None:
    """A watermark (epoch microseconds in report.json) as a time a reader can read."""
    if micros is None:
        return None
    moment = datetime.fromtimestamp(micros / 1_000_000, tz=UTC).replace(tzinfo=None)
    return time_text(moment, "UTC")


LISTED_TITLES = {
    "late_events": ("Late events", "the (row, window) pairs the stream left out as late"),
    "quarantined": ("Quarantined rows", "changelog lines set aside as malformed"),
    "anomalies": ("Source anomalies", "rows kept that break the changelog protocol"),
}


def _listed(report: dict) -> list[dict]:
    """Each listed kind of row: a title, what the rows are, how many are shown of how many, where
    the full table is, and the rows."""
    listed = []
    for kind, listing in (report.get("listed_rows") or {}).items():
        title, what = LISTED_TITLES.get(kind, (kind, ""))
        rows = listing.get("rows") or []
        listed.append(
            {
                "id": kind.replace("_", "-"),
                "title": title,
                "what": what,
                "shown": f"{len(rows):,} of {listing.get('total', len(rows)):,}",
                "table": listing.get("table"),
                "rows": rows_table(rows),
            }
        )
    return listed
