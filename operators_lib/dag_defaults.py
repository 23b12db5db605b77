"""What every lockstep DAG shares: where the specs, settings and runs are, the pool, the start.

Environment overrides: LOCKSTEP_QUERIES (specs folder), LOCKSTEP_RUNS_DIR (runs folder),
LOCKSTEP_SETTINGS (settings file). Reads YAML only: nothing heavy at DAG-parse time.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
# Scheduled runs start here; other dates are backfills (`airflow backfill create`).
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
POOL = "lockstep_spark"  # one slot, so two Spark jobs never share 2 cores; scripts/airflow.sh creates it


def queries_dir() -> Path:
    return Path(os.environ.get("LOCKSTEP_QUERIES", PROJECT / "conf" / "queries"))


def settings_path() -> Path | None:
    path = Path(os.environ.get("LOCKSTEP_SETTINGS", PROJECT / "conf" / "settings.yaml"))
    return path if path.exists() else None


def runs_dir() -> Path:
    from jobs.spec import load_settings

    configured = os.environ.get("LOCKSTEP_RUNS_DIR")
    if configured:
        return Path(configured)
    path = load_settings(settings_path()).runs_dir
    return path if path.is_absolute() else PROJECT / path
