"""`make race`: lockstep's stream step and Flink SQL side by side, over the very same changelog files.

For each query class and input size, both engines read the same files, generated once into
state/race/<class>-<size>/: Debezium JSON lines ({"before", "after", "op": c/u/d}; an update is
one "u" line) for the orders and products changelogs, plain JSON lines for the insert-only order
events. Each engine runs as one process, timed from outside, start-up included:

- Flink: tests/benchmarks/flink_race.py in .venv-flink: filesystem sources, INSERT INTO a
  blackhole sink, streaming mode, parallelism 2, run until the bounded files are read. The
  JVM gets the heap lockstep's Spark driver gets (spark.driver_memory, 4g by default).
- lockstep: `lockstep stream <spec>`: staging, the Spark Structured Streaming micro-batches and
  the Delta sink, with the spec's defaults (no stream.rows_per_batch unless --rows-per-batch).
- lockstep's whole certification: `lockstep run <spec>` into a fresh run folder (skipped with
  --stream-only): the stream, the batch job and the Great Expectations check, as a user runs
  it. Its report gives each step's seconds, and the check's phases with their Spark jobs
  (report.json's step_seconds and check_phases): the table of where the time goes.

Measured per class and size: changelog rows (an update counts as two rows, -U and +U, as lockstep
counts them), each engine's seconds and rows/s, the ratio lockstep / Flink, each engine's peak
memory (the whole process tree, Python and JVM, sampled every 0.1 s; proportional set sizes, see
memory.py), and lockstep's micro-batches with the mean micro-batch seconds of the first and the
last tenth of them (of the first and last micro-batch below ten), per stage for multi-stage
queries: a flat time per micro-batch means the state does not slow the stream down as it grows.
Per class, from the two sizes: each engine's marginal rate, the extra rows over the extra
seconds, free of start-up. Then, untimed (skipped with --no-check), whether lockstep's sink holds
Flink's final rows: a fast answer counts only if it is the right one.

Query classes: group_aggregate, window (tumbling one-minute window per pId over order_time, a
watermark of one day so no order is late; lockstep's default emit: final, as Flink's window TVF),
dedup_then_aggregate, inner_join, left_join, join_then_aggregate (orders keyed by (order_id, pId)
in the joins, as tests/benchmarks/bench_stream.py explains).

    python -m tests.benchmarks.race                    # all classes, default sizes (10-20 min)
    python -m tests.benchmarks.race --small            # sizes 20000,60000: a quick look
    python -m tests.benchmarks.race --sizes 50000,150000 --classes group_aggregate,window
        [--rows-per-batch N] [--engine spark]

With --engine spark, lockstep's steps run the spark engine (the stateful operators in Spark's
keyed state on the executors) on a standalone cluster of two one-core workers that the race
starts on 127.0.0.1 and stops at its end (tests/support/standalone_cluster.py), with the same
files and the same Flink run beside it; the figures go to state/race/race-spark.json.

Sizes are logical events per source (the orders changelog of 300,000 events has about 375,000
rows). Prints the date, the machine and one table; writes the figures to state/race/race.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import psutil
import yaml
from deltalake import DeltaTable

from jobs.changelog.generate import TIMED_SCHEMA, order_changes
from jobs.runtime.phases import phase_line
from jobs.spec.load import load_settings
from tests.benchmarks.bench_stream import DEDUP_SQL, GROUP_SQL, JOIN_SQL, LEFT_JOIN_SQL, WINDOW_SQL
from tests.benchmarks.memory import SAMPLE_SECONDS, descendants_memory, process_memory
from tests.benchmarks.workloads import ORDER_EVENTS_SCHEMA, PRODUCTS_SCHEMA, order_events, product_changes
from tests.differential.compare import column_difference, row_difference
from tests.support.standalone_cluster import StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "state" / "race"
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"
FLINK_SIDE = Path(__file__).with_name("flink_race.py")
DEFAULT_SIZES = [60_000, 180_000]
SMALL_SIZES = [20_000, 60_000]
RUN_TIMEOUT = 1800  # seconds an engine may take for one run before the race gives up on it

FLINK_WINDOW_SQL = (
    "SELECT pId, window_start AS `minute`, SUM(income) AS total, COUNT(*) AS orders FROM TABLE("
    "TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' MINUTE)) "
    "GROUP BY pId, window_start, window_end"
)
JOIN_AGGREGATE_SQL = (
    "SELECT p.name, SUM(o.income) AS total, COUNT(*) AS n FROM orders o JOIN products p "
    "ON o.pId = p.pId GROUP BY p.name"
)


@dataclass(frozen=True)
class Engine:
    """Where lockstep's steps run: its own operators on the settings' master (local), or the
    spark engine on a cluster's master."""

    name: str = "local"
    master: str | None = None

    def arguments(self) -> list[str]:
        return [] if self.master is None else ["--engine", self.name, "--master", self.master]


LOCAL = Engine()


# -- the query classes --------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryClass:
    name: str
    spark_sql: str
    flink_sql: str
    sources: tuple[str, ...]  # of SOURCES
    windowed: bool = False

    @property
    def joins(self) -> bool:
        return "products" in self.sources


CLASSES = {
    c.name: c
    for c in [
        QueryClass("group_aggregate", GROUP_SQL, GROUP_SQL, ("orders",)),
        QueryClass("window", WINDOW_SQL, FLINK_WINDOW_SQL, ("orders",), windowed=True),
        QueryClass("dedup_then_aggregate", DEDUP_SQL, DEDUP_SQL, ("events",)),
        QueryClass("inner_join", JOIN_SQL, JOIN_SQL, ("orders", "products")),
        QueryClass("left_join", LEFT_JOIN_SQL, LEFT_JOIN_SQL, ("orders", "products")),
        QueryClass("join_then_aggregate", JOIN_AGGREGATE_SQL, JOIN_AGGREGATE_SQL, ("orders", "products")),
    ]
}


@dataclass(frozen=True)
class Source:
    """One generated source as both engines declare it."""

    schema: str  # lockstep's
    flink_columns: tuple[tuple[str, str], ...]
    format: str
    flink_options: tuple[tuple[str, str], ...] = ()


SOURCES = {
    # The generator writes order_time as "2026-11-21 00:00:15.656520": Flink's SQL timestamp
    # format (its ISO-8601 one wants a 'T'); lockstep's Arrow reader takes it as it is.
    "orders": Source(
        TIMED_SCHEMA,
        (("order_id", "BIGINT"), ("pId", "BIGINT"), ("income", "BIGINT"), ("order_time", "TIMESTAMP(3)")),
        "debezium-json",
        (("debezium-json.timestamp-format.standard", "SQL"),),
    ),
    "products": Source(PRODUCTS_SCHEMA, (("pId", "BIGINT"), ("name", "STRING")), "debezium-json"),
    "events": Source(ORDER_EVENTS_SCHEMA, (("order_id", "BIGINT"), ("company", "STRING"), ("seq", "BIGINT")), "json"),
}


def primary_key(query: QueryClass, source: str) -> list[str]:
    """Orders keyed by (order_id, pId) in joins: a side's key must contain its join key for the
    join's output to keep an upsert key (bench_stream.py); the events are append-only, no key."""
    return {"orders": ["order_id", "pId"] if query.joins else ["order_id"], "products": ["pId"], "events": []}[source]


# -- inputs: generated once per source and size, the files both engines read ---------------------


def write_inputs(folder: Path, query: QueryClass, size: int, keys: int | None = None) -> int:
    """Write the class's source files into `folder` unless they are there; return changelog rows.
    `keys`: products (orders' pId and products' pId draw from them); default a tenth of `size`."""
    return sum(_write_source(folder, source, size, keys or max(size // 10, 10)) for source in query.sources)


def _write_source(folder: Path, source: str, size: int, keys: int) -> int:
    # One file per source: a changelog is ordered, and Flink reads several files of a folder in
    # parallel, in no set order, which would let a key's delete overtake its insert. Written a
    # line at a time: the cluster benchmark's sources are tens of millions of rows.
    data, rows_file = folder / source / "part-00000.json", folder / f"{source}.rows"
    if not rows_file.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        rows = 0
        with data.open("w") as out:
            for line, count in source_lines(source, size, keys):
                out.write(line + "\n")
                rows += count
        rows_file.write_text(str(rows))  # last: its presence says the data file is whole
    return int(rows_file.read_text())


def source_lines(source: str, size: int, keys: int) -> Iterator[tuple[str, int]]:
    """A source's lines for `size` logical events, each with the changelog rows it holds."""
    if source == "orders":
        return debezium_lines(order_changes(size, keys))
    if source == "products":
        return debezium_lines(product_changes(max(size // 2, 1), keys))
    return ((json.dumps(row, separators=(",", ":")), 1) for row in order_events(size, max(size // 4, 1)))


def debezium_lines(changes: Iterable[dict]) -> Iterator[tuple[str, int]]:
    """changelog-json rows as Debezium lines, each with its changelog rows: +I is "c", -D is "d",
    and a -U with the +U right after it (the generators write them adjacent) is one "u" line with
    both images."""
    before = None
    for change in changes:
        row = {k: v for k, v in change.items() if k != "op"}
        op = change["op"]
        if (op == "+U") != (before is not None):
            raise ValueError(f"a -U must be followed by its +U: {change}")
        if op == "-U":
            before = row
            continue
        image = {"+I": (None, row, "c", 1), "+U": (before, row, "u", 2), "-D": (row, None, "d", 1)}[op]
        yield json.dumps({"before": image[0], "after": image[1], "op": image[2]}, separators=(",", ":")), image[3]
        before = None


# -- the two engines' descriptions of the same query --------------------------------------------


def flink_job(folder: Path, query: QueryClass) -> Path:
    """The job file flink_race.py reads: source tables, the Flink SQL, parallelism 2."""
    tables = []
    for name in query.sources:
        source = SOURCES[name]
        table = {
            "name": name,
            "path": str(folder / name),
            "format": source.format,
            "columns": [list(c) for c in source.flink_columns],
            "primary_key": primary_key(query, name),
            "options": dict(source.flink_options),
        }
        if query.windowed:
            table.update(event_time="order_time", watermark_delay="INTERVAL '1' DAY")
        tables.append(table)
    path = folder / "flink-job.json"
    path.write_text(json.dumps({"sql": query.flink_sql, "parallelism": 2, "tables": tables}, indent=1))
    return path


def lockstep_spec(folder: Path, query: QueryClass, rows_per_batch: int | None) -> Path:
    """The query spec `lockstep stream` reads; the stream settings stay the defaults unless asked."""
    sources = {}
    for name in query.sources:
        source = {"path": str(folder / name), "format": SOURCES[name].format, "schema": SOURCES[name].schema}
        if primary_key(query, name):
            source["primary_key"] = primary_key(query, name)
        if query.windowed:
            source.update(event_time="order_time", watermark="1 day")
        sources[name] = source
    spec = {"name": f"race_{query.name}", "sql": query.spark_sql, "sources": sources}
    if rows_per_batch:
        spec["stream"] = {"rows_per_batch": rows_per_batch}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# -- one row of the race -------------------------------------------------------------------------


def race_one(
    query: QueryClass,
    size: int,
    work: Path = WORK,
    rows_per_batch: int | None = None,
    check: bool = True,
    whole_run: bool = True,
    engine: Engine = LOCAL,
) -> dict:
    """Both engines over the same files of one class and size: the row of the table; with
    `whole_run`, lockstep's whole `run` as well; with `check`, then lockstep's sink against
    Flink's final rows (untimed)."""
    folder = work / f"{query.name}-{size}"
    rows = write_inputs(folder, query, size)
    row = {"class": query.name, "size": size, "rows": rows}
    row["flink"] = _announced(query, rows, "flink", lambda: run_flink(folder, query))
    row["lockstep"] = _announced(query, rows, "lockstep", lambda: run_lockstep(folder, query, rows_per_batch, engine))
    row["stages"] = micro_batches(folder / "runs" / f"race_{query.name}")
    row["lockstep"]["first_batch_seconds"] = first_batch_seconds(
        folder / "runs" / f"race_{query.name}", row["lockstep"]
    )
    read = row["stages"][0]["rows"] if row["stages"] else 0
    if row["lockstep"]["exit"] == 0 and read != rows:
        row["lockstep"]["note"] = f"read {read:,} of {rows:,} changelog rows"
    if whole_run:
        row["run"] = _announced(query, rows, "lockstep run", lambda: run_whole(folder, query, rows_per_batch, engine))
    if check and row["flink"]["exit"] == 0 and row["lockstep"]["exit"] == 0:
        row["results"] = check_results(folder, query)
        print(f"race: {query.name} {rows:,} rows: results {row['results']}", flush=True)
    return row


def check_results(folder: Path, query: QueryClass) -> str:
    """ "equal" when lockstep's sink holds Flink's final rows as a multiset (floating values within
    the differential tests' tolerance), else what differs: a fast wrong answer is no answer. Flink
    runs the query again, untimed, collecting its result instead of discarding it."""
    answer_path = folder / "flink-results.json"
    job = json.loads(flink_job(folder, query).read_text())
    job_path = folder / "flink-results-job.json"
    job_path.write_text(json.dumps({**job, "results_to": str(answer_path)}, indent=1))
    answer_path.unlink(missing_ok=True)
    done = subprocess.run(
        [str(FLINK_PYTHON), str(FLINK_SIDE), str(job_path)],
        env=flink_env(folder),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    if done.returncode != 0 or not answer_path.exists():
        return f"not checked: Flink's collecting run failed: {done.stdout.strip()[-300:] or done.stderr[-300:]}"
    answer = json.loads(answer_path.read_text())
    sink = DeltaTable(str(folder / "runs" / f"race_{query.name}" / "stream")).to_pyarrow_table()
    columns = column_difference(sink.column_names, answer)
    if columns:
        return f"columns differ: {columns}"
    return row_difference(sink.column_names, sink.to_pylist(), answer) or "equal"


def _announced(query: QueryClass, rows: int, engine: str, run) -> dict:
    print(f"race: {query.name} {rows:,} rows: {engine} ...", flush=True)
    result = run()
    outcome = (
        f"{result['seconds']:.1f} s, peak {result['peak_mib']:,} MiB"
        if result["exit"] == 0
        else f"FAILED (exit {result['exit']}): {result['error']}"
    )
    print(f"race: {query.name} {rows:,} rows: {engine} {outcome}", flush=True)
    return result


def run_flink(folder: Path, query: QueryClass) -> dict:
    if not FLINK_PYTHON.exists():
        return {
            "exit": None,
            "seconds": 0.0,
            "peak_mib": 0,
            "error": f"{FLINK_PYTHON} is missing: `make setup` creates the Flink environment",
        }
    result = measure(
        [str(FLINK_PYTHON), str(FLINK_SIDE), str(flink_job(folder, query))], folder / "flink", flink_env(folder)
    )
    reported = _last_json(folder / "flink.out")
    if reported.get("error"):
        result["error"] = reported["error"]
    result["query_seconds"] = reported.get("query_seconds")
    return result


def flink_env(folder: Path) -> dict:
    """flink_race.py's environment: its JVM's log folder and heap, and nothing of lockstep's
    (PYTHONPATH) leaking into Flink's."""
    env = {**os.environ, "FLINK_LOG_DIR": str(folder / "flink-log"), "JVM_ARGS": flink_jvm_args()}
    env.pop("PYTHONPATH", None)
    return env


def flink_jvm_args() -> str:
    """The Flink JVM's heap as large as lockstep's Spark driver's, unless JVM_ARGS says otherwise."""
    return os.environ.get("JVM_ARGS") or f"-Xmx{load_settings().spark.driver_memory}"


def run_lockstep(folder: Path, query: QueryClass, rows_per_batch: int | None, engine: Engine = LOCAL) -> dict:
    runs = folder / "runs"
    shutil.rmtree(runs, ignore_errors=True)  # the stream is incremental: a rerun would read nothing
    command = [
        sys.executable,
        "-m",
        "jobs.cli.main",
        "stream",
        str(lockstep_spec(folder, query, rows_per_batch)),
        "--out",
        str(runs),
        *engine.arguments(),
    ]
    return measure(command, folder / "lockstep", dict(os.environ))


def run_whole(folder: Path, query: QueryClass, rows_per_batch: int | None, engine: Engine = LOCAL) -> dict:
    """`lockstep run`, timed from outside as the stream step is, with its report's steps and
    the check's phases. Exit 1 (the check failed) is a finished run; its verdict says so."""
    runs = folder / "runs-whole"
    shutil.rmtree(runs, ignore_errors=True)
    spec = lockstep_spec(folder, query, rows_per_batch)
    command = [sys.executable, "-m", "jobs.cli.main", "run", str(spec), "--out", str(runs), *engine.arguments()]
    result = measure(command, folder / "lockstep-run", dict(os.environ))
    report_path = runs / f"race_{query.name}" / "report.json"
    if result["exit"] in (0, 1) and report_path.exists():
        report = json.loads(report_path.read_text())
        result.update(
            exit=0,
            verdict=report["verdict"],
            steps=report.get("step_seconds", {}),
            check_phases=report.get("check_phases", {}),
        )
    return result


def _last_json(path: Path) -> dict:
    for line in reversed(path.read_text().splitlines() if path.exists() else []):
        if line.startswith("{"):
            return json.loads(line)
    return {}


# -- measuring a process from outside -----------------------------------------------------------


def measure(command: list[str], logs: Path, env: dict, timeout: float = RUN_TIMEOUT) -> dict:
    """Run one engine to its end (killed after `timeout` seconds): exit code, wall seconds, peak
    memory of its process tree, and the last line of its error output when it failed. Output goes
    to <logs>.out / <logs>.err."""
    with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
        started, started_at = time.monotonic(), time.time()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, env=env, start_new_session=True)
        peak = PeakTreeMemory(process.pid)
        peak.start()
        code = _wait(process, timeout)
        seconds = time.monotonic() - started
    peak_bytes = peak.stop()
    error = None if code == 0 else _last_line(Path(f"{logs}.err")) or f"exit {code}"
    return {
        "exit": code,
        "seconds": round(seconds, 2),
        "peak_mib": round(peak_bytes / 2**20),
        "root_peak_mib": round(peak.root_peak / 2**20),
        "error": error,
        "started_at": started_at,
    }


def _wait(process: subprocess.Popen, timeout: float) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the JVM child goes with it
        process.wait()
        return -signal.SIGKILL


def _last_line(path: Path) -> str:
    """lockstep's own error line if there is one, else a Java cause, else the last line."""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    ours = [line.removeprefix("lockstep: error: ") for line in lines if line.startswith("lockstep: error: ")]
    causes = [line for line in lines if line.startswith("Caused by")]
    return (ours or causes or lines or [""])[-1][:300]


class PeakTreeMemory(threading.Thread):
    """The largest memory of a process and all its descendants (the JVM a Python driver starts)
    together, sampled every SAMPLE_SECONDS until stop(): proportional set sizes, see memory.py."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.peak, self._done = psutil.Process(pid), 0, threading.Event()
        self.root_peak = 0  # the process alone (a Python driver without its JVM)

    def run(self) -> None:
        while not self._done.is_set():
            root = process_memory(self.root)
            self.root_peak = max(self.root_peak, root)
            self.peak = max(self.peak, root + descendants_memory(self.root))
            self._done.wait(SAMPLE_SECONDS)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


# -- lockstep's micro-batches -------------------------------------------------------------------


def micro_batches(run: Path) -> list[dict]:
    """Per stage, in the order they ran (intermediate stages first, the sink's stage last): its
    micro-batches, the rows they read, and the mean seconds of the first and the last tenth."""
    return [_stage_figures(name, log) for name, log in _batch_logs(run)]


def _batch_logs(run: Path) -> list[tuple[str, Path]]:
    """Each stage's batches log that exists, (stage, path), in the order the stages ran."""
    stage_logs = sorted(run.glob("stages/*/_state/batches.jsonl"), key=lambda p: p.stat().st_mtime)
    logs = [(p.parents[1].name, p) for p in stage_logs] + [("final", run / "_state" / "batches.jsonl")]
    return [(name, log) for name, log in logs if log.exists()]


def first_batch_seconds(run: Path, result: dict) -> float | None:
    """Seconds from the command to the end of lockstep's first micro-batch (of any stage)."""
    ends = [e["finished_at"] for _, log in _batch_logs(run) for e in logged_batches(log)[:1] if "finished_at" in e]
    return round(min(ends) - result["started_at"], 2) if ends and "started_at" in result else None


def logged_batches(log: Path) -> list[dict]:
    """A stage's batches log (one JSON line per micro-batch the handler finished)."""
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def _stage_figures(name: str, log: Path) -> dict:
    entries = logged_batches(log)
    seconds = [e["seconds"] for e in entries]
    tenth = max(1, len(seconds) // 10)
    return {
        "stage": name,
        "count": len(entries),
        "rows": sum(e["rows"] for e in entries),
        "first_tenth_seconds": round(_mean(seconds[:tenth]), 3),
        "last_tenth_seconds": round(_mean(seconds[-tenth:]), 3),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# -- figures across sizes -----------------------------------------------------------------------


def marginal(small: dict, large: dict, engine: str) -> float | None:
    """Extra rows over extra seconds from the smaller size to the larger: the rate with the
    start-up (the same at both sizes) taken out. None when a run failed or took no longer."""
    if small[engine]["exit"] != 0 or large[engine]["exit"] != 0:
        return None
    extra_seconds = large[engine]["seconds"] - small[engine]["seconds"]
    return (large["rows"] - small["rows"]) / extra_seconds if extra_seconds > 0 else None


def marginal_rates(results: list[dict]) -> list[dict]:
    """Per class with two sizes or more: each engine's marginal rate between its smallest and
    largest size, and lockstep's time per extra row relative to Flink's."""
    rates = []
    for name in dict.fromkeys(r["class"] for r in results):
        rows = sorted((r for r in results if r["class"] == name), key=lambda r: r["rows"])
        if len(rows) < 2:
            continue
        flink, mine = marginal(rows[0], rows[-1], "flink"), marginal(rows[0], rows[-1], "lockstep")
        whole = marginal(rows[0], rows[-1], "run") if all("run" in r for r in (rows[0], rows[-1])) else None
        rates.append(
            {
                "class": name,
                "flink_rows_per_second": flink,
                "lockstep_rows_per_second": mine,
                "run_rows_per_second": whole,
                "lockstep_over_flink": flink / mine if flink and mine else None,
                "why_missing": {
                    e: _why_no_marginal(rows[0], rows[-1], e)
                    for e in ("flink", "lockstep")
                    if marginal(rows[0], rows[-1], e) is None
                },
            }
        )
    return rates


def _why_no_marginal(small: dict, large: dict, engine: str) -> str:
    if small[engine]["exit"] != 0 or large[engine]["exit"] != 0:
        return "a run failed"
    return "the larger size took no longer: start-up and noise outweigh the extra rows; try larger sizes"


# -- the report ---------------------------------------------------------------------------------


def machine() -> dict:
    return {
        "date": date.today().isoformat(),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "flink": _flink_version(),
        "flink_jvm_args": flink_jvm_args(),
        "spark_master": load_settings().spark.master,
    }


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor() or "?"
    )


def _flink_version() -> str:
    found = sorted(ROOT.glob(".venv-flink/lib/python*/site-packages/apache_flink-*.dist-info"))
    return found[0].name.removeprefix("apache_flink-").removesuffix(".dist-info") if found else "missing"


def print_header(info: dict, engine: Engine = LOCAL) -> None:
    print(
        f"race on {info['date']}: {info['host']}, {info['cores']} cores ({info['cpu']}), "
        f"{info['memory_gib']:g} GiB memory",
        flush=True,
    )
    print(
        f"Flink {info['flink']} (PyFlink, streaming, parallelism 2, {info['flink_jvm_args']}, blackhole sink) "
        f"against lockstep stream ({_engine_words(info, engine)}, Delta sink), whole processes timed",
        flush=True,
    )


def _engine_words(info: dict, engine: Engine) -> str:
    if engine.master is None:
        return f"Spark {info['spark_master']}"
    return f"the {engine.name} engine on a standalone cluster {engine.master}, two one-core workers"


def print_table(results: list[dict], rates: list[dict]) -> None:
    print(
        "\n| class | changelog rows | Flink s | lockstep s | Flink rows/s | lockstep rows/s | lockstep / Flink "
        "| lockstep run s | lockstep run / Flink "
        "| peak MiB Flink | peak MiB lockstep | micro-batches | micro-batch s, first / last tenth "
        "| lockstep's first micro-batch done, s from the command | lockstep's sink = Flink's result |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in results:
        f, s, whole = r["flink"], r["lockstep"], r.get("run")
        print(
            f"| {r['class']} | {r['rows']:,} | {_seconds(f)} | {_seconds(s)} | {_rate(r, f)} | {_rate(r, s)} | "
            f"{_ratio(f, s)} | {_seconds(whole) if whole else '-'} | {_ratio(f, whole) if whole else '-'} | "
            f"{_mib(f)} | {_mib(s)} | {_batch_counts(r)} | {_batch_seconds(r)} | "
            f"{_first_batch(s)} | {_results(r)} |"
        )
    print_where_time_goes(results)
    if rates:
        print(
            "\n| class | marginal rows/s Flink | marginal rows/s lockstep | lockstep / Flink per extra row "
            "| marginal rows/s lockstep run |"
        )
        print("|---|--:|--:|--:|--:|")
        for m in rates:
            ratio = f"{m['lockstep_over_flink']:.1f}x" if m["lockstep_over_flink"] else "-"
            print(
                f"| {m['class']} | {_number(m['flink_rows_per_second'])} | "
                f"{_number(m['lockstep_rows_per_second'])} | {ratio} | {_number(m.get('run_rows_per_second'))} |"
            )
    _print_notes(results, rates)


def print_where_time_goes(results: list[dict]) -> None:
    """`lockstep run`'s seconds by step (the rest: the process's start and its summary), and the
    check's slowest phases with their Spark jobs."""
    runs = [r for r in results if r.get("run", {}).get("steps")]
    if not runs:
        return
    print(
        "\n| class | changelog rows | verdict | run s | stream s | batch s | check s | the rest s "
        "| the check's slowest phases |"
    )
    print("|---|--:|---|--:|--:|--:|--:|--:|---|")
    for r in runs:
        run, steps = r["run"], r["run"]["steps"]
        rest = run["seconds"] - sum(steps.values())
        print(
            f"| {r['class']} | {r['rows']:,} | {run['verdict'].upper()} | {run['seconds']:.1f} | "
            f"{steps.get('stream', 0):.1f} | {steps.get('batch', 0):.1f} | {steps.get('check', 0):.1f} | "
            f"{rest:.1f} | {phase_line(run['check_phases'], most=3)} |"
        )


def _print_notes(results: list[dict], rates: list[dict]) -> None:
    """What the table cannot say in a cell: why a run failed or a rate is missing, a lockstep run
    that read fewer rows than were written, and how multi-stage cells read."""
    notes = [
        f"- {r['class']} {r['rows']:,} rows, {engine}: {r[engine].get('error') or r[engine].get('note')}"
        for r in results
        for engine in ("flink", "lockstep", "run")
        if engine in r and (r[engine]["exit"] != 0 or r[engine].get("note"))
    ]
    notes += [
        f"- {m['class']}, no marginal rate for {engine}: {why}"
        for m in rates
        for engine, why in m["why_missing"].items()
    ]
    notes += [
        f"- {r['class']} {r['rows']:,} rows, results: {r['results']}"
        for r in results
        if r.get("results", "equal") != "equal"
    ]
    if any(len(r["stages"]) > 1 for r in results):
        notes.append(
            "- multi-stage queries: micro-batches and their seconds per stage, in the order "
            "the stages ran (stage 1 + stage 2)"
        )
    if notes:
        print("\n" + "\n".join(notes))


def _results(row: dict) -> str:
    """The check's cell: yes, NO (the notes say what differs), or - when not checked."""
    found = row.get("results")
    return "-" if found is None or found.startswith("not checked") else ("yes" if found == "equal" else "NO")


def _seconds(run: dict) -> str:
    return f"{run['seconds']:.1f}" if run["exit"] == 0 else f"failed ({run['exit']})"


def _rate(row: dict, run: dict) -> str:
    return f"{row['rows'] / run['seconds']:,.0f}" if run["exit"] == 0 else "-"


def _ratio(flink: dict, mine: dict) -> str:
    return f"{mine['seconds'] / flink['seconds']:.1f}x" if flink["exit"] == 0 and mine["exit"] == 0 else "-"


def _mib(run: dict) -> str:
    return f"{run['peak_mib']:,}" if run["exit"] is not None else "-"


def _first_batch(run: dict) -> str:
    first = run.get("first_batch_seconds")
    return f"{first:.1f}" if first is not None else "-"


def _batch_counts(row: dict) -> str:
    return " + ".join(str(stage["count"]) for stage in row["stages"]) or "-"


def _batch_seconds(row: dict) -> str:
    return " + ".join(f"{s['first_tenth_seconds']:.2f} / {s['last_tenth_seconds']:.2f}" for s in row["stages"]) or "-"


def _number(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


# -- the command --------------------------------------------------------------------------------


def main() -> None:
    args = _arguments()
    info = machine()
    if args.engine == "spark":
        with StandaloneCluster(WORK / "cluster", workers=2) as cluster:
            results = _race(args, info, Engine("spark", cluster.url))
    else:
        results = _race(args, info, LOCAL)
    if any(_results(r) == "NO" for r in results):
        sys.exit("race: lockstep's sink differs from Flink's result (see the notes above)")


def _race(args: argparse.Namespace, info: dict, engine: Engine) -> list[dict]:
    print_header(info, engine)
    results = [
        race_one(
            CLASSES[name],
            size,
            rows_per_batch=args.rows_per_batch,
            check=args.check,
            whole_run=args.whole_run,
            engine=engine,
        )
        for name in args.classes
        for size in args.sizes
    ]
    rates = marginal_rates(results)
    WORK.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": info,
        "engine": {"name": engine.name, "master": engine.master or info["spark_master"]},
        "sizes": args.sizes,
        "rows_per_batch": args.rows_per_batch,
        "results": results,
        "marginal": rates,
    }
    figures = WORK / ("race.json" if engine.master is None else f"race-{engine.name}.json")
    figures.write_text(json.dumps(report, indent=1))
    print_table(results, rates)
    print(f"\nfigures: {figures}")
    return results


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument(
        "--sizes",
        type=_numbers,
        default=DEFAULT_SIZES,
        help=f"logical events per source, comma-separated (default: {_listed(DEFAULT_SIZES)})",
    )
    sizes.add_argument(
        "--small",
        action="store_const",
        dest="sizes",
        const=SMALL_SIZES,
        help=f"sizes {_listed(SMALL_SIZES)}: a quick look",
    )
    parser.add_argument(
        "--classes",
        type=_classes,
        default=list(CLASSES),
        help=f"query classes, comma-separated (default: all: {','.join(CLASSES)})",
    )
    parser.add_argument(
        "--rows-per-batch",
        type=int,
        default=None,
        help="set lockstep's stream.rows_per_batch (default: unset, lockstep's own sizing)",
    )
    parser.add_argument(
        "--engine",
        choices=["local", "spark"],
        default="local",
        help="lockstep's engine: local (its own operators on the settings' master; the default) or spark "
        "(Spark's keyed state, on a standalone cluster of two one-core workers the race starts)",
    )
    parser.add_argument(
        "--stream-only",
        dest="whole_run",
        action="store_false",
        help="time lockstep's stream step alone, not also the whole `lockstep run` (stream, batch and check)",
    )
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="skip the untimed check of lockstep's sink against Flink's final rows "
        "(a second Flink run per class and size)",
    )
    return parser.parse_args()


def _numbers(text: str) -> list[int]:
    return [int(n) for n in text.split(",")]


def _classes(text: str) -> list[str]:
    names = text.split(",")
    unknown = [n for n in names if n not in CLASSES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown class {unknown[0]!r} (known: {', '.join(CLASSES)})")
    return names


def _listed(sizes: list[int]) -> str:
    return ",".join(str(n) for n in sizes)


if __name__ == "__main__":
    main()
