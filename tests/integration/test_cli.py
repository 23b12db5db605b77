"""The `lockstep` command as a user runs it: exit codes, one-line errors, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, change, late_event_spec, orders_spec, write_changelog

LOCKSTEP = [sys.executable, "-m", "jobs.cli.main"]


def lockstep(*args, cwd: Path, env: dict | None = None, timeout: int = 600):
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [*LOCKSTEP, *map(str, args)], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def start_lockstep(*args, env: dict | None = None) -> subprocess.Popen:
    """`lockstep ARGS` in the background from the checkout, its stderr kept for the test."""
    return subprocess.Popen(
        [*LOCKSTEP, *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


GOOD = [change("+I", 1, 1, 5), change("+I", 2, 1, 6)]


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"order_id": 3, "pId": 1, "income": 5, "op": "+X"}', "orders/002.json:2: unknown op '+X'"),
        ('{"order_id": 3, "pId": 1, "income": 5', "orders/002.json:2: malformed JSON"),
        (
            '{"order_id": 3, "pId": "one", "income": 5, "op": "+I"}',
            "orders/002.json:2: column 'pId': value \"one\" does not fit BIGINT",
        ),
        (
            '{"order_id": 9, "pId": 1, "income": 5, "op": "-D"}',
            "orders/002.json:2: -D for key (order_id=9), which was never inserted",
        ),
    ],
)
def test_a_bad_changelog_row_exits_2_with_one_line_naming_file_and_line(tmp_path, line, message):
    write_changelog(tmp_path / "orders", "001.json", GOOD)
    (tmp_path / "orders" / "002.json").write_text(json.dumps(change("+I", 5, 2, 1)) + "\n" + line + "\n")
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [f"lockstep: error: {message}" + _rest(result, message)]
    assert not (tmp_path / "runs" / "q" / "stream").exists()
    assert not (tmp_path / "runs" / "q" / "_state" / "staged" / "orders" / "manifest.json").exists()


def _rest(result, message):
    line = result.stderr.strip().splitlines()[-1]
    return line[len("lockstep: error: ") + len(message) :]


@pytest.mark.parametrize(
    "edit, message",
    [
        (("format: changelog-json", "formt: changelog-json"), "q.yaml:6: sources.orders.formt: unknown key"),
        (
            ("stream:", "sink:\n  changelog_mode: append\nstream:"),
            "doesn't support consuming update and delete changes which is produced by node ChangelogSource(",
        ),
    ],
)
def test_an_invalid_spec_or_sql_exits_2_before_anything_runs(tmp_path, edit, message):
    write_changelog(tmp_path / "orders", "001.json", GOOD)
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    spec.write_text(spec.read_text().replace(*edit))
    result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockstep: error: ") and message in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_stream_and_batch_that_disagree_exit_1_with_the_fail_line_and_nothing_on_stderr(tmp_path):
    spec = late_event_spec(tmp_path)
    result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0] == "late: FAIL  stream 2 rows, batch 2 rows; 16/17 expectations hold"
    assert "diagnosis: 1 row differs: 1 explained by late events dropped by the watermark" in result.stdout
    assert result.stderr == ""
    assert json.loads((tmp_path / "runs" / "late" / "report.json").read_text())["verdict"] == "fail"
    checked = lockstep("check", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert checked.returncode == 1 and checked.stdout.startswith("late: FAIL"), checked.stderr


def test_explain_and_help_work_without_spark(tmp_path):
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    explained = lockstep("explain", spec, cwd=tmp_path)
    assert explained.returncode == 0
    assert "GroupAggregate(groupBy=[pId]" in explained.stdout and "changelogMode=[I,UA,D]" in explained.stdout
    for command in ("run", "stream", "batch", "check", "explain", "demo", "generate"):
        assert lockstep(command, "--help", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_a_nullable_field_left_out_reads_as_null_and_is_counted_in_the_report(tmp_path):
    write_changelog(tmp_path / "orders", "001.json", GOOD)
    (tmp_path / "orders" / "002.json").write_text('{"order_id": 3, "pId": 1, "op": "+I"}\n')
    spec = orders_spec(tmp_path, "SELECT pId, COUNT(income) AS priced, COUNT(*) AS n FROM orders GROUP BY pId")
    result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "with a field left out (read as NULL): 1" in result.stdout
    report = json.loads((tmp_path / "runs" / "q" / "report.json").read_text())
    assert report["rows_with_absent_fields"] == 1
    # Where the run's time went: its three steps, and the check's phases with their Spark jobs.
    steps, phases = report["step_seconds"], report["check_phases"]
    assert list(steps) == ["stream", "batch", "check"] and min(steps.values()) > 0, steps
    assert steps["check"] == report["check_seconds"] >= sum(p["seconds"] for p in phases.values()) - 0.05
    assert phases["suite unity"]["spark_jobs"] >= 1 and phases["loading Great Expectations"]["spark_jobs"] == 0
    assert f"time: stream {steps['stream']:.1f} s, batch {steps['batch']:.1f} s" in result.stdout


@pytest.mark.slow
def test_stderr_stays_empty_off_a_terminal_and_the_jvm_writes_to_the_runs_folder(tmp_path):
    write_changelog(tmp_path / "orders", "001.json", GOOD)
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    result = lockstep("run", spec, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # not a terminal: no progress, and nothing of the JVM's
    log = (tmp_path / "runs" / "logs" / "q.spark.log").read_text()
    assert "WARN" in log  # Spark's own warnings (the JVM's, log4j's) went to the file


def test_a_java_failure_reads_as_its_innermost_cause_not_the_py4j_call(spark):
    from py4j.protocol import Py4JJavaError

    from jobs.errors import one_line

    jvm = spark._jvm
    failed = jvm.java.util.concurrent.CompletableFuture.failedFuture(jvm.java.io.IOException("disk full"))
    with pytest.raises(Py4JJavaError) as info:
        failed.get()  # ExecutionException caused by the IOException: PySpark passes it on unconverted
    assert str(info.value).startswith("An error occurred while calling")  # py4j's own first line
    assert one_line(info.value) == "java.io.IOException: disk full"


def test_a_python_worker_failure_reads_as_the_error_the_worker_raised(spark):
    from pyspark.errors import PythonException
    from pyspark.sql import functions as F

    from jobs.errors import one_line

    def divide(value):
        return 1 // value

    with pytest.raises(PythonException) as info:
        spark.range(1).select(F.udf(divide, "long")("id")).collect()
    assert "ZeroDivisionError" not in str(info.value).strip().splitlines()[0]  # Spark's first line
    assert one_line(info.value) == (
        "PythonException in a Spark Python worker: ZeroDivisionError: integer division or modulo by zero"
    )


JVM_ARGUMENTS = """
import sys
from jobs.cli import commands
from jobs.cli.main import _parser
from jobs.runtime.spark import spark_session
commands._pipeline(_parser().parse_args(sys.argv[1:]))
runtime = spark_session()._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(" ".join(runtime.getInputArguments()))
"""


@pytest.mark.parametrize("quick_jit_below_mib, quick", [(256, True), (0, False)])
def test_a_small_input_starts_the_driver_jvm_with_its_quick_compiler_alone(tmp_path, quick_jit_below_mib, quick):
    write_changelog(tmp_path / "orders", "001.json", GOOD)
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"spark:\n  quick_jit_below_mib: {quick_jit_below_mib}\n")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            JVM_ARGUMENTS,
            "stream",
            str(spec),
            "--settings",
            str(settings),
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert ("-XX:TieredStopAtLevel=1" in result.stdout.split()) is quick


def test_a_session_started_without_knowing_its_input_keeps_both_compilers(spark):
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" not in list(runtime.getInputArguments())
