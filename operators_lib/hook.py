"""The `lockstep` connection type: where lockstep's Spark runs, kept as an Airflow connection.

A connection of this type (the default id is `lockstep_spark`) names a standalone master by its
host and port (spark://host:port), or any master URL in its extra as {"master": "local[2]"}.
Registered through the provider (operators_lib/provider.py), so Airflow's connection form shows
only those fields.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

STANDALONE_PORT = 7077


class LockstepHook(BaseHook):
    conn_name_attr = "lockstep_conn_id"
    default_conn_name = "lockstep_spark"
    conn_type = "lockstep"
    hook_name = "lockstep"

    def __init__(self, lockstep_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lockstep_conn_id = lockstep_conn_id

    def spark_master(self) -> str:
        """The master URL the connection names."""
        return master_of(self.get_connection(self.lockstep_conn_id))

    def get_conn(self) -> str:
        return self.spark_master()

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "login", "password"],
            "relabeling": {"host": "Spark master host", "port": "Spark master port"},
            "placeholders": {
                "host": "spark-master.internal",
                "port": str(STANDALONE_PORT),
                "extra": '{"master": "spark://host:7077"} (instead of host and port)',
            },
        }


def master_of(connection: Any) -> str:
    """A connection's master: the extra's `master`, else spark://host:port."""
    master = (connection.extra_dejson or {}).get("master")
    if master:
        return str(master)
    host = connection.host or "127.0.0.1"
    return host if "://" in host else f"spark://{host}:{connection.port or STANDALONE_PORT}"
