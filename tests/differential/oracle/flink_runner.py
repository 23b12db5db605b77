"""Flink SQL as the oracle: run a differential case through PyFlink, in streaming mode, and write
the final table its output changelog leaves, and whether Flink plans the query as append-only.

This file runs in the Flink environment (.venv-flink, made by scripts/setup.sh), never in
lockstep's: PyFlink pins its own pandas and pyarrow. The two sides talk through files only.

    flink_runner.py CASE.json OUT.json [CASE.json OUT.json ...]   run these, then exit
    flink_runner.py --serve      read "CASE.json OUT.json" lines on stdin, answer "done OUT.json"
                                 per line: one JVM for a whole differential run

A case (see tests/differential/case.py) gives Flink's SQL and each source's columns, primary key,
event time and watermark, and rows as [kind, value, ...] with kinds +I, -U, +U, -D. Each source
becomes a DataStream of Rows carrying their RowKind, registered with from_changelog_stream.
Values are converted to the exact Python type of their column first: PyFlink turns a value of
the wrong type into NULL without a word.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import re
import sys
import time
from pathlib import Path

# Flink reads TIMESTAMP values through the JVM's and Python's local zone: make both UTC before
# the gateway starts. The JVM's log goes to a file beside the outputs, at WARN.
os.environ["TZ"] = "UTC"
time.tzset()
os.environ.setdefault("JVM_ARGS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx1g")
_LOG4J = Path(__file__).with_name("log4j-flink.properties")
os.environ.setdefault("LOG4J_PROPERTIES", str(_LOG4J))

import pyarrow as pa  # noqa: E402
import pytz  # noqa: E402
from pyflink.common import Row, RowKind  # noqa: E402
from pyflink.common.typeinfo import Types  # noqa: E402
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment  # noqa: E402
from pyflink.java_gateway import get_gateway  # noqa: E402
from pyflink.table import ChangelogMode, DataTypes, EnvironmentSettings, Schema, StreamTableEnvironment  # noqa: E402
from pyflink.table.explain_detail import ExplainDetail  # noqa: E402
from pyflink.table.serializers import ArrowSerializer  # noqa: E402
from pyflink.table.types import create_arrow_schema  # noqa: E402

KINDS_IN = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER, "-D": RowKind.DELETE}


def column_types(type_name: str, not_null: bool):
    """(DataStream type info, Table data type, value converter) of a case column type."""
    decimal_type = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", type_name)
    if decimal_type:
        info, data_type = Types.BIG_DEC(), DataTypes.DECIMAL(int(decimal_type[1]), int(decimal_type[2]))
        convert = lambda v: decimal.Decimal(str(v))  # noqa: E731
    elif type_name == "TIMESTAMP":
        # A java.sql.Timestamp from the DataStream side: the table type must be bridged to it.
        info, data_type = Types.SQL_TIMESTAMP(), DataTypes.TIMESTAMP(3).bridged_to("java.sql.Timestamp")
        convert = datetime.datetime.fromisoformat
    else:
        info, data_type, convert = {
            "BIGINT": (Types.LONG(), DataTypes.BIGINT(), int),
            "DOUBLE": (Types.DOUBLE(), DataTypes.DOUBLE(), float),
            "STRING": (Types.STRING(), DataTypes.STRING(), str),
        }[type_name]
    if not_null:
        data_type = data_type.not_null()
    return info, data_type, (lambda v: None if v is None else convert(v))


def register(env, t_env, name: str, source: dict) -> None:
    names = [c["name"] for c in source["columns"]]
    key = source.get("primary_key") or []
    typed = [
        column_types(c["type"], c["name"] in key or c["name"] == source.get("event_time")) for c in source["columns"]
    ]
    rows = []
    for kind, *values in source["rows"]:
        row = Row(*[convert(v) for (_, _, convert), v in zip(typed, values)])
        row.set_row_kind(KINDS_IN[kind])
        rows.append(row)
    stream = env.from_collection(rows, type_info=Types.ROW_NAMED(names, [info for info, _, _ in typed]))
    schema = Schema.new_builder()
    for column, (_, data_type, _) in zip(names, typed):
        schema.column(column, data_type)
    if source.get("event_time"):
        schema.watermark(source["event_time"], f"`{source['event_time']}` - {_interval(source['watermark_ms'])}")
    if key:
        schema.primary_key(*key)
    mode = ChangelogMode.all() if any(kind != "+I" for kind, *_ in source["rows"]) else ChangelogMode.insert_only()
    t_env.create_temporary_view(name, t_env.from_changelog_stream(stream, schema.build(), mode))


def _interval(ms: int) -> str:
    """DAY TO SECOND(3): Flink's SQL rejects SECOND intervals wider than two digits."""
    days, rest = divmod(int(ms), 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY TO SECOND(3)"


def run_case(case: dict) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    t_env = StreamTableEnvironment.create(env, environment_settings=EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("table.local-time-zone", "UTC")
    # A watermark after every record: with the default 200 ms interval, whether a slightly late
    # row is dropped would depend on timing.
    config.set("pipeline.auto-watermark-interval", "0ms")
    for name, source in case["sources"].items():
        register(env, t_env, name, source)
    result = t_env.sql_query(case["flink_sql"])
    append = _root_changelog_mode(result.explain(ExplainDetail.CHANGELOG_MODE)) == "I"
    return {
        "columns": list(result.get_schema().get_field_names()),
        "final": final_rows(result),
        "append": append,
        "error": None,
    }


def final_rows(result) -> list[list]:
    """The rows the query's changelog leaves, as a sorted multiset.

    Flink folds the changelog in the JVM (+I/+U add a copy, -U/-D take one away; the method
    behind Table.to_pandas) and ships the rows as Arrow batches. Collected row by row, every row
    costs a handful of py4j round trips: a join's fan-out of 27,000 output changes took two
    minutes that way."""
    gateway = get_gateway()
    batch_size = (
        result._j_table.getTableEnvironment()
        .getConfig()
        .get(gateway.jvm.org.apache.flink.python.PythonOptions.MAX_ARROW_BATCH_SIZE)
    )
    batches = gateway.jvm.org.apache.flink.table.runtime.arrow.ArrowUtils.collectAsPandasDataFrame(
        result._j_table, batch_size
    )
    schema = result.get_schema()
    names, types = schema.get_field_names(), schema.get_field_data_types()
    if not batches.hasNext():
        return []
    serializer = ArrowSerializer(create_arrow_schema(names, types), schema.to_row_data_type(), pytz.UTC)
    table = pa.Table.from_batches(serializer.load_from_iterator(batches))
    rows = [[_json_value(row[name]) for name in table.column_names] for row in table.to_pylist()]
    return sorted(rows, key=json.dumps)


def _root_changelog_mode(explained: str) -> str | None:
    """The changelog mode Flink's planner gives the query's result: "I" for an append query."""
    plan = explained.split("== Optimized Physical Plan ==", 1)[-1].strip().splitlines()
    found = re.search(r"changelogMode=\[([^\]]*)\]", plan[0]) if plan else None
    return found.group(1) if found else None


def _json_value(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def describe(error: Exception) -> str:
    """The Java cause chain of a Flink error, one 'Class: message' per cause, or the Python error."""
    java = getattr(error, "java_exception", None)
    if java is None:
        text = str(error).strip()
        return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
    causes = []
    while java is not None and len(causes) < 10:
        causes.append(f"{java.getClass().getName()}: {java.getMessage()}")
        cause = java.getCause()
        java = None if cause is None or cause.equals(java) else cause
    return " <- ".join(causes)


def answer(case_path: str, out_path: str) -> None:
    started = time.monotonic()
    case = json.loads(Path(case_path).read_text())
    try:
        result = run_case(case)
    except Exception as error:  # Flink rejecting the query is an answer too
        result = {"error": describe(error)}
    result["seconds"] = round(time.monotonic() - started, 2)
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out_path)


def main(argv: list[str]) -> None:
    if argv == ["--serve"]:
        for line in sys.stdin:
            case_path, out_path = line.split()
            answer(case_path, out_path)
            print(f"done {out_path}", flush=True)
        return
    for case_path, out_path in zip(argv[::2], argv[1::2]):
        answer(case_path, out_path)


if __name__ == "__main__":
    main(sys.argv[1:])
