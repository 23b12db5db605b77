#!/usr/bin/env bash
# A local Airflow running lockstep's DAGs: api-server (UI and REST on 127.0.0.1), scheduler,
# dag-processor and triggerer, via `airflow standalone`. Its home is state/airflow (ignored by
# git); dags/ is the DAGs folder. Stop it with Ctrl-C (or SIGTERM to its process group).
#
# Environment: AIRFLOW_HOME, AIRFLOW_PORT (8080), LOCKSTEP_QUERIES (specs), LOCKSTEP_RUNS_DIR (runs
# folder for the DAGs and the report plugin). lockstep is an installed provider of this venv: its
# connection type, report link and plugin (reports under /lockstep/) need no setup here.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export AIRFLOW_HOME=${AIRFLOW_HOME:-$root/state/airflow}
export AIRFLOW__CORE__DAGS_FOLDER=$root/dags
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# Two task slots: with the lockstep_spark pool's one slot, one Spark job runs at a time, and the
# report DAG can run beside it. Fewer workers also makes SIGTERM end every child.
export AIRFLOW__CORE__PARALLELISM=2
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT=${AIRFLOW_PORT:-8080}
# Task processes report to the API server's Execution API: it must be this server's port.
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:${AIRFLOW__API__PORT}/execution/
export AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK=False
mkdir -p "$AIRFLOW_HOME"

export PATH=$root/.venv/bin:$PATH  # standalone starts its components as `airflow ...`
airflow=$root/.venv/bin/airflow
"$airflow" db migrate >/dev/null
"$airflow" pools set lockstep_spark 1 "lockstep: one Spark job at a time on 2 cores" >/dev/null
echo "airflow: http://127.0.0.1:${AIRFLOW__API__PORT} (user admin, password in" \
     "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated once it has started)" >&2
exec "$airflow" standalone
