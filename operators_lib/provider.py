"""lockstep as an Airflow provider: what `get_provider_info` tells Airflow's ProvidersManager
(the `apache_airflow_provider` entry point in pyproject.toml). The report plugin registers
through the `airflow.plugins` entry point instead: Airflow loads a provider's plugins only with
lazy provider discovery switched off, its entry point always."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "lockstep",  # must be the distribution's name
        "name": "lockstep",
        "description": "Batch-vs-stream consistency checks for Spark SQL over CDC changelogs: "
        "stream, batch and check operators, a report link and plugin, and DAGs "
        "built from query specs.",
        "integrations": [{"integration-name": "lockstep", "tags": ["software"]}],
        "operators": [{"integration-name": "lockstep", "python-modules": ["operators_lib.lockstep_operators"]}],
        "hooks": [{"integration-name": "lockstep", "python-modules": ["operators_lib.hook"]}],
        "connection-types": [
            {
                "connection-type": "lockstep",
                "hook-class-name": "operators_lib.hook.LockstepHook",
                "hook-name": "lockstep",
            }
        ],
        "extra-links": ["operators_lib.lockstep_operators.ReportLink"],
    }
