"""An Airflow connection named by the settings (the object store's, the Kafka brokers'), read
only when one is named: lockstep runs without Airflow otherwise."""

from __future__ import annotations

import json
from typing import Any

from jobs.errors import LockstepError


def airflow_connection(conn_id: str, setting: str, serves: str, error: type[LockstepError]) -> tuple[Any, dict]:
    """The connection that `setting` (e.g. "store.airflow_connection") names for `serves` (e.g.
    "the store"), and its extra as a dict; `error`, naming the setting, when Airflow is not
    installed or has no such connection."""
    try:
        from airflow.sdk import BaseHook
    except ImportError:
        raise error(
            f"the settings name an Airflow connection for {serves}, but Airflow is not installed",
            where=f"{setting} {conn_id!r}",
        ) from None
    try:
        connection = BaseHook.get_connection(conn_id)
    except Exception as exc:  # Airflow raises its own not-found error, whose type moved between releases
        raise error(f"no Airflow connection {conn_id!r} ({type(exc).__name__})", where=setting) from None
    return connection, json.loads(connection.extra or "{}")
