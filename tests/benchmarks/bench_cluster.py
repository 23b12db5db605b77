"""`make bench-cluster`: the two engines at two sizes, the spark engine on a standalone cluster.

A master and two workers start on 127.0.0.1 (tests/support/standalone_cluster.py, as the cluster
tests start them). For a group aggregate and an inner join (the race's classes and generated
files, tests/benchmarks/race.py), at each size, `lockstep stream` runs twice over the same files:

- `--engine spark --master spark://…`: the stateful operators on the executors;
- `--engine local` on `local[2]`: lockstep's own state on the driver.

Measured per run, from outside the process: wall seconds (start-up included), the driver's peak
memory (the lockstep process and its driver JVM, proportional set sizes: memory.py; in brackets
the lockstep process alone), the executors' peak memory (every process under the workers: under
the spark engine they stage the sources too), and the bytes Spark's tasks returned to the driver
(each task's result size, summed from Spark's event log; the local engine reads its input and
state on the driver itself, so its tasks return little). Per class and engine, the marginal rate
between the two sizes. The spark engine's point is the driver column: its peak should not grow
with the state between the sizes.

    python -m tests.benchmarks.bench_cluster [--sizes 200000,800000] [--keys 20000,80000]
        [--classes group_aggregate,inner_join] [--engines spark,local]

Sizes are logical events per source (race.py); the orders changelog of N events has about 1.25 N
rows, over N/10 products unless --keys says how many. The sink's rows are printed beside: for the
group aggregate, the live keys (one row per product with live orders). Writes the figures to
state/bench-cluster/bench-cluster.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
from pathlib import Path

import psutil
import yaml
from deltalake import DeltaTable

from tests.benchmarks.memory import SAMPLE_SECONDS, process_memory
from tests.benchmarks.race import CLASSES, lockstep_spec, machine, measure, write_inputs
from tests.conftest import ROOT
from tests.support.standalone_cluster import StandaloneCluster

WORK = ROOT / "state" / "bench-cluster"
ENGINES = ["spark", "local"]


class PeakExecutorMemory(threading.Thread):
    """The largest memory of every process the workers started (their executors) together."""

    def __init__(self, workers: list[int]):
        super().__init__(daemon=True)
        self.workers, self.peak, self._done = [psutil.Process(p) for p in workers], 0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, sum(self._held(worker) for worker in self.workers))
            self._done.wait(SAMPLE_SECONDS)

    @staticmethod
    def _held(worker: psutil.Process) -> int:
        try:
            return sum(process_memory(child) for child in worker.children(recursive=True))
        except psutil.Error:
            return 0

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def settings_file(folder: Path, events: Path) -> Path:
    """Settings with Spark's event log on, in `events`: where the task result sizes are read."""
    events.mkdir(parents=True, exist_ok=True)
    log = {"enabled": "true", "dir": events.as_uri(), "compress": "false", "rolling.enabled": "false"}
    settings = {"spark": {"extra": {f"spark.eventLog.{key}": value for key, value in log.items()}}}
    path = folder / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def result_bytes(events: Path) -> int:
    """Bytes the tasks of the run's application returned to the driver (its one event log)."""
    total = 0
    for log in (path for path in events.rglob("*") if path.is_file()):
        for line in log.read_text().splitlines():
            if '"SparkListenerTaskEnd"' in line:
                total += json.loads(line).get("Task Metrics", {}).get("Result Size", 0)
    return total


def run_one(folder: Path, query_name: str, engine: str, cluster: StandaloneCluster) -> dict:
    """One `lockstep stream` over the class's files on one engine: its figures."""
    runs, events = folder / f"runs-{engine}", folder / f"events-{engine}"
    shutil.rmtree(runs, ignore_errors=True)
    shutil.rmtree(events, ignore_errors=True)
    spec = lockstep_spec(folder, CLASSES[query_name], None)
    where = ["--master", cluster.url] if engine == "spark" else ["--master", "local[2]"]
    command = [sys.executable, "-m", "jobs.cli.main", "--settings", str(settings_file(folder, events))]
    command += ["stream", str(spec), "--out", str(runs), "--engine", engine, *where]
    executors = PeakExecutorMemory([p.pid for p in cluster.processes[1:]]) if engine == "spark" else None
    if executors:
        executors.start()
    figures = measure(command, folder / f"lockstep-{engine}", dict(os.environ))
    figures["executors_mib"] = round(executors.stop() / 2**20) if executors else None
    figures["result_bytes"] = result_bytes(events) if figures["exit"] == 0 else None
    figures["sink_rows"] = sink_rows(runs / f"race_{query_name}" / "stream") if figures["exit"] == 0 else None
    return figures


def sink_rows(table: Path) -> int:
    """The sink table's rows, from the Delta log's file statistics (nothing read)."""
    return sum(DeltaTable(str(table)).get_add_actions(flatten=True).column("num_records").to_pylist())


def marginal(small: dict, large: dict) -> float | None:
    extra = large["run"]["seconds"] - small["run"]["seconds"]
    ok = small["run"]["exit"] == 0 and large["run"]["exit"] == 0 and extra > 0
    return (large["rows"] - small["rows"]) / extra if ok else None


def print_table(rows: list[dict]) -> None:
    print(
        f"\n{'class':<16} {'engine':<6} {'rows':>11} {'seconds':>8} {'rows/s':>8} {'marginal':>9} "
        f"{'driver MiB (Python)':>19} {'executors MiB':>13} {'bytes to driver':>16} {'sink rows':>10}"
    )
    for row in rows:
        run = row["run"]
        seconds = f"{run['seconds']:.1f}" if run["exit"] == 0 else f"exit {run['exit']}"
        rate = f"{row['rows'] / run['seconds']:,.0f}" if run["exit"] == 0 else "-"
        rate_m = f"{row['marginal']:,.0f}" if row.get("marginal") else "-"
        executors = f"{run['executors_mib']:,}" if run["executors_mib"] is not None else "-"
        sent = f"{run['result_bytes']:,}" if run["result_bytes"] is not None else "-"
        sink = f"{run['sink_rows']:,}" if run["sink_rows"] is not None else "-"
        driver = f"{run['peak_mib']:,} ({run['root_peak_mib']:,})"
        print(
            f"{row['class']:<16} {row['engine']:<6} {row['rows']:>11,} {seconds:>8} {rate:>8} {rate_m:>9} "
            f"{driver:>19} {executors:>13} {sent:>16} {sink:>10}"
        )
        if run["exit"] != 0:
            print(f"  {row['engine']} failed: {run['error']}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.keys and len(args.keys) != len(args.sizes):
        print("bench-cluster: --keys takes one number per size", file=sys.stderr)
        return 2
    _print_header(machine())
    rows = []
    with StandaloneCluster(WORK / "cluster", workers=2) as cluster:
        for name in args.classes:
            for size, keys in zip(args.sizes, args.keys or [max(size // 10, 10) for size in args.sizes]):
                folder = WORK / f"{name}-{size}-{keys}"
                print(f"bench-cluster: writing {name}'s input, {size:,} events over {keys:,} keys", flush=True)
                changelog_rows = write_inputs(folder, CLASSES[name], size, keys)
                for engine in args.engines:
                    print(f"bench-cluster: {name} {changelog_rows:,} rows, engine {engine}", flush=True)
                    run = run_one(folder, name, engine, cluster)
                    rows.append({"class": name, "size": size, "rows": changelog_rows, "engine": engine, "run": run})
    for name in args.classes:
        for engine in args.engines:
            mine = sorted((r for r in rows if r["class"] == name and r["engine"] == engine), key=lambda r: r["rows"])
            if len(mine) > 1:
                mine[-1]["marginal"] = marginal(mine[0], mine[-1])
    (WORK / "bench-cluster.json").write_text(json.dumps(rows, indent=1))
    print_table(rows)
    print(f"\nfigures: {WORK / 'bench-cluster.json'}")
    return 0 if all(r["run"]["exit"] == 0 for r in rows) else 1


def _print_header(info: dict) -> None:
    print(
        f"bench-cluster on {info['date']}: {info['host']}, {info['cores']} cores ({info['cpu']}), "
        f"{info['memory_gib']:g} GiB memory; the spark engine on a standalone cluster of two workers "
        f"(one core, 2 GiB each), the local engine on local[2]; whole processes timed",
        flush=True,
    )


def _parser() -> argparse.ArgumentParser:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_cluster", description=summary)
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[200_000, 800_000],
        help="logical events per source, smallest first (default 200000,800000)",
    )
    parser.add_argument(
        "--keys",
        type=lambda text: [int(n) for n in text.split(",")],
        default=None,
        help="products (group keys, join keys) at each size (default a tenth of each size)",
    )
    parser.add_argument(
        "--engines",
        type=lambda text: text.split(","),
        default=ENGINES,
        help="the engines to run, in order (default spark,local)",
    )
    parser.add_argument(
        "--classes",
        type=lambda text: text.split(","),
        default=["group_aggregate", "inner_join"],
        help="the race's query classes (default group_aggregate,inner_join)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
