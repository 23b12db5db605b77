"""Where a Kafka source's bootstrap servers come from, so that a spec need not name a cluster.

In order, the first that gives them wins:
1. the source's own `kafka.bootstrap_servers` in the spec;
2. the settings file's `kafka.bootstrap_servers`;
3. the Airflow connection the settings name (`kafka.airflow_connection`): its extra's
   bootstrap_servers, else host:port;
4. the environment: LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS.
"""

from __future__ import annotations

import os

from jobs.errors import SpecError
from jobs.runtime.airflow_connections import airflow_connection
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
    connection, extra = airflow_connection(conn_id, "kafka.airflow_connection", "Kafka", SpecError)
    if extra.get("bootstrap_servers"):
        return str(extra["bootstrap_servers"])
    if connection.host:
        return f"{connection.host}:{connection.port}" if connection.port else connection.host
    return None
