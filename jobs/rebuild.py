"""Rebuild: replay every partition, date by date, into a fresh run folder, checking each date on
the way; for when the query changed and the old sink no longer answers it.

The old run folder is moved aside to <query>.before-rebuild and kept until every date of the new
one passes; then it is deleted. If a date fails, the new folder is kept as
<query>.failed-rebuild-<time> for inspection and the old one is put back. A rebuild that was killed
leaves <query>.before-rebuild: the next rebuild discards the half-built folder and starts again
from there, so running it again is always safe.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.changelog.partitions import dates_in
from jobs.plan import Plan
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress

if TYPE_CHECKING:
    from expectations.report.model import Report


def rebuild(
    plan: Plan,
    layout: RunLayout,
    progress: Progress,
    run_date: Callable[[date | None], Report],
    until: date | None = None,
) -> list[Report]:
    """Run `run_date` (stream, batch and check of one logical date) for every date in a fresh
    folder; return each date's report (one report when no source is partitioned)."""
    old = _set_aside(layout)
    reports = []
    try:
        for day in rebuild_dates(plan, until):
            progress.say(f"rebuild {plan.spec.name}: {day or 'all input'}")
            reports.append(run_date(day))
            if not reports[-1].passed:
                _put_back(layout, old, progress)
                return reports
    except Exception:  # an invalid input or SQL half-way: the old folder goes back too
        _put_back(layout, old, progress)
        raise
    if old.exists():
        shutil.rmtree(old)
    progress.say(f"rebuild {plan.spec.name}: {len(reports)} date(s) pass; the new sink replaces the old one")
    return reports


def rebuild_dates(plan: Plan, until: date | None) -> list[date | None]:
    found = sorted({d for s in plan.spec.sources.values() if s.partitioned_by for d in dates_in(s.folder)})
    days: list[date | None] = [d for d in found if until is None or d <= until]
    return days or [until]


def _set_aside(layout: RunLayout) -> Path:
    old = layout.root.with_name(layout.root.name + ".before-rebuild")
    if old.exists():
        shutil.rmtree(layout.root, ignore_errors=True)  # a killed rebuild's half-built folder
    elif layout.root.exists():
        layout.root.rename(old)
    return old


def _put_back(layout: RunLayout, old: Path, progress: Progress) -> None:
    failed = layout.root.with_name(f"{layout.root.name}.failed-rebuild-{time.strftime('%Y%m%dT%H%M%S')}")
    if layout.root.exists():
        layout.root.rename(failed)
    if old.exists():
        old.rename(layout.root)
    progress.say(
        f"rebuild {layout.root.name}: a date failed; the old run folder is back in place, the "
        f"new one is kept as {failed}"
    )
