"""The Flink side of the race (tests/benchmarks/race.py): one query over changelog files with
Flink SQL in streaming mode, into a blackhole sink, until the bounded files are read.

This file runs in the Flink environment (.venv-flink), never in lockstep's: nothing of lockstep
is imported, and the race talks to it through the job file, the environment and stdout only. The
race times this whole process from outside, JVM start-up included.

    flink_race.py JOB.json

JOB.json:
    {"sql": "SELECT ...", "parallelism": 2,
     "tables": [{"name": "orders", "path": "/abs/folder", "format": "debezium-json",
                 "columns": [["order_id", "BIGINT"], ...], "primary_key": ["order_id"],
                 "options": {"debezium-json.timestamp-format.standard": "SQL"},
                 "event_time": "order_time", "watermark_delay": "INTERVAL '1' DAY"}]}

Prints one JSON line: {"query_seconds": ...} (from submitting the INSERT to the job's end), or
{"error": "<Java cause chain>"} and exits 1 when Flink rejects or fails the query.

With "results_to": "/abs/out.json" in the job, the query's final rows are collected instead of
sent to the blackhole (untimed: the race checks lockstep's sink against them) and written there
as {"columns": [...], "final": [[...], ...]}, the differential oracle's answer format.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

# Importing the oracle's runner makes Flink's TIMESTAMPs UTC (the JVM's and Python's zone) and
# points Flink's log4j at its quiet configuration, before the gateway starts; the race also uses
# its description of Flink's errors. The JVM's log goes to FLINK_LOG_DIR (the race sets it).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "differential" / "oracle"))
from flink_runner import describe, final_rows  # noqa: E402
from pyflink.table import EnvironmentSettings, TableEnvironment  # noqa: E402

SINK = "race_sink"


def source_ddl(table: dict) -> str:
    """CREATE TABLE for one filesystem source: columns, watermark, primary key, format options."""
    parts = [f"`{name}` {kind}" for name, kind in table["columns"]]
    if table.get("event_time"):
        column = table["event_time"]
        parts.append(f"WATERMARK FOR `{column}` AS `{column}` - {table['watermark_delay']}")
    if table.get("primary_key"):
        parts.append(f"PRIMARY KEY ({', '.join(f'`{c}`' for c in table['primary_key'])}) NOT ENFORCED")
    options = {"connector": "filesystem", "path": table["path"], "format": table["format"], **table.get("options", {})}
    return f"CREATE TABLE `{table['name']}` ({', '.join(parts)}) WITH ({_with(options)})"


def sink_ddl(t_env: TableEnvironment, sql: str) -> str:
    """A blackhole table shaped like the query's result: it accepts inserts, updates and deletes."""
    schema = t_env.sql_query(sql).get_schema()
    columns = [f"`{name}` {kind}" for name, kind in zip(schema.get_field_names(), schema.get_field_data_types())]
    return f"CREATE TABLE `{SINK}` ({', '.join(columns)}) WITH ({_with({'connector': 'blackhole'})})"


def _with(options: dict) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def run(job: dict) -> float:
    """Seconds from submitting INSERT INTO the sink to the end of the job (or from submitting
    the query to its last result row collected, with results_to)."""
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", str(job.get("parallelism", 2)))
    config.set("table.local-time-zone", "UTC")
    for table in job["tables"]:
        t_env.execute_sql(source_ddl(table))
    if job.get("results_to"):
        started = time.monotonic()
        result = t_env.sql_query(job["sql"])
        answer = {"columns": list(result.get_schema().get_field_names()), "final": final_rows(result)}
        Path(job["results_to"]).write_text(json.dumps(answer))
        return time.monotonic() - started
    t_env.execute_sql(sink_ddl(t_env, job["sql"]))
    started = time.monotonic()
    t_env.execute_sql(f"INSERT INTO `{SINK}` {job['sql']}").wait()
    return time.monotonic() - started


def main(job_path: str) -> int:
    try:
        seconds = run(json.loads(Path(job_path).read_text()))
    except Exception as error:  # Flink rejecting the query is an outcome the race prints
        print(json.dumps({"error": describe(error)}), flush=True)
        return 1
    print(json.dumps({"query_seconds": round(seconds, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
