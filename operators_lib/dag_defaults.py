"""What every lockstep DAG shares: where the specs, settings and runs are, the pool, the start.

Environment overrides: LOCKSTEP_QUERIES (specs folder), LOCKSTEP_RUNS_DIR (runs folder),
LOCKSTEP_SETTINGS (settings file). Without them, a checkout's conf/ (next to dags/), as `make
airflow` runs it. Reads YAML only: nothing heavy at DAG-parse time.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
# Scheduled runs start here; other dates are backfills (`airflow backfill create`).
START = datetime(2026, 1, 1, tzinfo=UTC)
POOL = "lockstep_spark"  # one slot, so two Spark jobs never share 2 cores; scripts/airflow.sh creates it
PLUGIN_PREFIX = "/lockstep"  # where the report plugin (operators_lib/plugin.py) sits on the API server


def queries_dir() -> Path:
    return Path(os.environ.get("LOCKSTEP_QUERIES", PROJECT / "conf" / "queries"))


def settings_path() -> Path | None:
    path = Path(os.environ.get("LOCKSTEP_SETTINGS", PROJECT / "conf" / "settings.yaml"))
    return path if path.exists() else None


def runs_dir() -> Path | str:
    """The runs folder: LOCKSTEP_RUNS_DIR, else the settings' runs_dir (relative to the project),
    or an object store's s3a:// URL."""
    from jobs.spec import load_settings

    path = load_settings(settings_path()).runs_dir  # LOCKSTEP_RUNS_DIR, when set, is in it
    return path if isinstance(path, str) or path.is_absolute() else PROJECT / path
