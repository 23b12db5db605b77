"""The Flink side of the race (tests/benchmarks/race.py): one query over changelog files, Flink
SQL in streaming mode, parallelism 2, into a blackhole sink, until the bounded files are read.

This file runs in the Flink environment (.venv-flink), never in lockstep's; the race times this
whole process from outside, start-up included.

    flink_race.py JOB.json

JOB.json: {"sql": ..., "tables": [{"name", "columns": [[name, flink type], ...], "primary_key":
[...], "path", "format", "watermark": "<column> - INTERVAL ..." or null}]}
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ["TZ"] = "UTC"
time.tzset()
_LOG4J = Path(__file__).resolve().parents[1] / "differential" / "oracle" / "log4j-flink.properties"
os.environ.setdefault("LOG4J_PROPERTIES", str(_LOG4J))

from pyflink.table import EnvironmentSettings, TableDescriptor, TableEnvironment  # noqa: E402


def table_ddl(table: dict) -> str:
    parts = [f"`{name}` {kind}" for name, kind in table["columns"]]
    if table.get("watermark"):
        column = table["watermark"].split()[0]
        parts.append(f"WATERMARK FOR `{column}` AS {table['watermark']}")
    if table.get("primary_key"):
        parts.append(f"PRIMARY KEY ({', '.join(table['primary_key'])}) NOT ENFORCED")
    return (f"CREATE TABLE `{table['name']}` ({', '.join(parts)}) WITH ('connector' = 'filesystem', "
            f"'path' = '{table['path']}', 'format' = '{table['format']}')")


def main(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", "2")
    config.set("table.local-time-zone", "UTC")
    for table in job["tables"]:
        t_env.execute_sql(table_ddl(table))
    started = time.monotonic()
    t_env.sql_query(job["sql"]).execute_insert(TableDescriptor.for_connector("blackhole").build()).wait()
    print(json.dumps({"query_seconds": round(time.monotonic() - started, 3)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
