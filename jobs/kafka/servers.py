"""Where a Kafka source's bootstrap servers come from, so that a spec need not name a cluster.

In order, the first that gives them wins:
1. the source's own `kafka.bootstrap_servers` in the spec;
2. the settings file's `kafka.bootstrap_servers`;
3. the Airflow connection the settings name (`kafka.airflow_connection`): its extra's
   bootstrap_servers, else host:port;
4. the environment: LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS.
"""

from __future__ import annotations

import json
import os

from jobs.errors import SpecError
from jobs.spec.model import KafkaSettings, QuerySpec

VARIABLE = "LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS"


def with_bootstrap_servers(spec: QuerySpec, settings: KafkaSettings) -> QuerySpec:
    """The spec with every Kafka source's bootstrap servers filled in."""
    sources = dict(spec.sources)
    for name, source in spec.sources.items():
        if source.kafka is not None and not source.kafka.bootstrap_servers:
            servers = bootstrap_servers(settings, f"source {name} (kafka topic {source.kafka.topic})")
            kafka = source.kafka.model_copy(update={"bootstrap_servers": servers})
            sources[name] = source.model_copy(update={"kafka": kafka})
    return spec.model_copy(update={"sources": sources}) if sources != spec.sources else spec


def bootstrap_servers(settings: KafkaSettings, where: str) -> str:
    found = settings.bootstrap_servers or _from_airflow(settings.airflow_connection) or os.environ.get(VARIABLE)
    if not found:
        raise SpecError(
            f"no Kafka bootstrap servers: give kafka.bootstrap_servers in the settings (or the source), an "
            f"Airflow connection (kafka.airflow_connection) or {VARIABLE}",
            where=where,
        )
    return found


def _from_airflow(conn_id: str | None) -> str | None:
    if not conn_id:
        return None
    try:
        from airflow.sdk import BaseHook
    except ImportError:
        raise SpecError(
            "the settings name an Airflow connection for Kafka, but Airflow is not installed",
            where=f"kafka.airflow_connection {conn_id!r}",
        ) from None
    try:
        connection = BaseHook.get_connection(conn_id)
    except Exception as exc:  # Airflow raises its own not-found error, whose type moved between releases
        raise SpecError(
            f"no Airflow connection {conn_id!r} ({type(exc).__name__})", where="kafka.airflow_connection"
        ) from None
    extra = json.loads(connection.extra or "{}")
    if extra.get("bootstrap_servers"):
        return str(extra["bootstrap_servers"])
    if connection.host:
        return f"{connection.host}:{connection.port}" if connection.port else connection.host
    return None
