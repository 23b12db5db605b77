"""`make bench`: the large generated changelog through the stream, batch and check steps.

Prints changelog events per second for the stream step (cold: the first streaming query of a new
JVM; warm: the same run again in a fresh run folder on the now-warm session, as a long-running
service would see it), the batch step and the whole run, and the peak memory of the driver
(Python process + Spark JVM, sampled every 0.2 s). Then the same changelog through a one-minute
tumbling window query (event times over a day, emit early, a watermark of a day so that nothing is
late), warm, and the window path's cost per event relative to the group aggregate's.

    python -m tests.benchmarks.bench_stream [--events 300000] [--rows-per-batch 50000]
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

import psutil
import yaml

from jobs.changelog.generate import SCHEMA, TIMED_SCHEMA, generate_changelog

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "state" / "bench"
GROUP_SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId"
WINDOW_SQL = ("SELECT pId, window.start AS minute, SUM(income) AS total, COUNT(*) AS orders "
              "FROM orders GROUP BY pId, window(order_time, '1 minute')")


class PeakMemory(threading.Thread):
    """Peak resident memory of this process plus its children (the Spark JVM)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self._stop = 0, threading.Event()

    def run(self):
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                rss = me.memory_info().rss + sum(c.memory_info().rss for c in me.children(recursive=True))
            except psutil.Error:
                rss = 0
            self.peak = max(self.peak, rss)
            time.sleep(0.2)

    def stop(self) -> int:
        self._stop.set()
        return self.peak


def main() -> None:
    args = _arguments()
    data = WORK / f"changelog-timed-{args.events}"
    if not data.exists():
        print(f"generating {args.events:,} events into {data} ...", flush=True)
        generate_changelog(data, events=args.events)
    spec = _spec(data, GROUP_SQL, args.rows_per_batch)
    window_spec = _spec(data, WINDOW_SQL, args.rows_per_batch, windowed=True)
    memory = PeakMemory()
    memory.start()
    started = time.monotonic()
    from jobs.runtime.spark import spark_session
    from jobs.spec.model import Settings

    settings = Settings()
    spark_session(settings.spark)
    spark_up = time.monotonic() - started
    cold = _run(spec, settings, "cold")
    warm = _run(spec, settings, "warm")
    window = _run(window_spec, settings, "window")
    peak = memory.stop()
    rows = cold["rows"]
    print()
    print(f"changelog: {rows:,} events ({args.events:,} logical; updates are -U/+U pairs), "
          f"micro-batches of {args.rows_per_batch:,} rows, 2 cores")
    print(f"group query: {GROUP_SQL}")
    print(f"window query: {WINDOW_SQL}")
    print(f"spark session start            {spark_up:7.1f} s")
    for label, r in (("cold", cold), ("warm", warm)):
        print(f"[{label}] stream step ({r['batches']} micro-batches) {r['stream']:7.1f} s  "
              f"{rows / r['stream']:>9,.0f} events/s")
        print(f"[{label}] batch step                  {r['batch']:7.1f} s  {rows / r['batch']:>9,.0f} events/s")
        print(f"[{label}] check step                  {r['check']:7.1f} s")
        print(f"[{label}] whole run                   {r['total']:7.1f} s  {rows / r['total']:>9,.0f} events/s"
              f"  verdict {r['verdict']}")
    print(f"[window] stream step ({window['batches']} micro-batches) {window['stream']:7.1f} s  "
          f"{rows / window['stream']:>9,.0f} events/s  ({window['stream'] / warm['stream']:.2f}x the "
          f"warm group aggregate per event)  verdict {window['verdict']}")
    print(f"peak driver memory (python + JVM RSS) {peak / 2**20:,.0f} MiB")


def _run(spec: Path, settings, label: str) -> dict:
    from expectations.check import run_check
    from jobs.batch.job import run_batch
    from jobs.plan import plan_query
    from jobs.runtime.layout import RunLayout
    from jobs.runtime.progress import Progress
    from jobs.spec import load_spec
    from jobs.stream.job import run_stream

    plan = plan_query(load_spec(spec))
    layout = RunLayout.for_query(WORK / f"runs-{label}", plan.spec.name)
    shutil.rmtree(layout.root, ignore_errors=True)
    progress = Progress()
    t0 = time.monotonic()
    stream = run_stream(plan, settings, layout, progress)
    t1 = time.monotonic()
    run_batch(plan, settings, layout, progress)
    t2 = time.monotonic()
    report = run_check(plan, settings, layout, progress)
    t3 = time.monotonic()
    return {"rows": stream.input_rows, "batches": stream.batches, "stream": t1 - t0,
            "batch": t2 - t1, "check": t3 - t2, "total": t3 - t0, "verdict": report["verdict"]}


def _spec(data: Path, sql: str, rows_per_batch: int, windowed: bool = False) -> Path:
    source = {"path": str(data), "format": "changelog-json", "primary_key": ["order_id"],
              "schema": TIMED_SCHEMA if windowed else SCHEMA}
    spec = {"name": "bench_window" if windowed else "bench", "sql": sql,
            "sources": {"orders": source}, "stream": {"rows_per_batch": rows_per_batch}}
    if windowed:
        source.update(event_time="order_time", watermark="1 day")
        spec["sink"] = {"emit": "early"}
    path = WORK / f"{spec['name']}.yaml"
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--rows-per-batch", type=int, default=50_000)
    return parser.parse_args()


if __name__ == "__main__":
    main()
