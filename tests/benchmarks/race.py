"""`make race`: lockstep's stream step and Flink SQL side by side, on the same changelog files.

Per query class and input size, both engines read the very same Debezium JSON files (an insert-only
source: plain JSON lines): Flink SQL (PyFlink from .venv-flink, streaming mode, parallelism 2, a
blackhole sink; tests/benchmarks/flink_race.py) and `lockstep stream` with the spec's defaults
(its Delta sink). Each engine is one process, timed from outside, start-up included; its peak
memory is the largest resident size of the process and its children (Python and JVM), sampled
every 0.1 s. Printed per row: changelog rows, seconds and rows/s of each engine, the ratio, peak
memory, and lockstep's micro-batch count with the mean micro-batch seconds of the first and last
tenth of its micro-batches (flat is the goal). Per class: the marginal rate of each engine, the
extra rows of the larger size over the extra seconds, which is free of start-up.

    python -m tests.benchmarks.race [--sizes 100000,400000] [--classes group_aggregate,...]
        [--rows-per-batch N]   (many micro-batches: to see whether their cost stays flat)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import psutil
import yaml

from jobs.changelog.generate import TIMED_SCHEMA, generate_changelog
from tests.benchmarks.workloads import ORDER_EVENTS_SCHEMA, PRODUCTS_SCHEMA, generate_order_events, generate_products

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "state" / "race"
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"

ORDERS = [["order_id", "BIGINT"], ["pId", "BIGINT"], ["income", "BIGINT"], ["order_time", "TIMESTAMP(3)"]]
PRODUCTS = [["pId", "BIGINT"], ["name", "STRING"]]
EVENTS = [["order_id", "BIGINT"], ["company", "STRING"], ["seq", "BIGINT"]]
JOIN = "SELECT o.order_id, o.pId, o.income, p.name FROM orders o JOIN products p ON o.pId = p.pId"
DEDUP_INNER = ("SELECT order_id, company, seq FROM (SELECT order_id, company, seq, ROW_NUMBER() OVER "
               "(PARTITION BY order_id ORDER BY seq DESC) AS rn FROM events) t WHERE rn = 1")


@dataclass(frozen=True)
class QueryClass:
    name: str
    spark_sql: str
    flink_sql: str
    sources: tuple[str, ...]  # of orders, products, events
    windowed: bool = False


CLASSES = {c.name: c for c in [
    QueryClass("group_aggregate", "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId",
               "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId", ("orders",)),
    QueryClass("window",
               "SELECT pId, window.start AS w_start, SUM(income) AS total, COUNT(*) AS orders FROM orders "
               "GROUP BY pId, window(order_time, '1 minute')",
               "SELECT pId, window_start AS w_start, SUM(income) AS total, COUNT(*) AS orders FROM TABLE("
               "TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' MINUTE)) "
               "GROUP BY pId, window_start, window_end", ("orders",), windowed=True),
    QueryClass("dedup_then_aggregate",
               f"SELECT company, COUNT(DISTINCT order_id) AS n FROM ({DEDUP_INNER}) d GROUP BY company",
               f"SELECT company, COUNT(DISTINCT order_id) AS n FROM ({DEDUP_INNER}) d GROUP BY company", ("events",)),
    QueryClass("inner_join", JOIN, JOIN, ("orders", "products")),
    QueryClass("left_join", JOIN.replace(" JOIN ", " LEFT JOIN "), JOIN.replace(" JOIN ", " LEFT JOIN "),
               ("orders", "products")),
    QueryClass("join_then_aggregate",
               "SELECT p.name, SUM(o.income) AS total, COUNT(*) AS n FROM orders o JOIN products p "
               "ON o.pId = p.pId GROUP BY p.name",
               "SELECT p.name, SUM(o.income) AS total, COUNT(*) AS n FROM orders o JOIN products p "
               "ON o.pId = p.pId GROUP BY p.name", ("orders", "products")),
]}


def main() -> None:
    args = _arguments()
    print(f"race on {date.today()}, {platform.node()}: {os.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB", flush=True)
    results = []
    for name in args.classes:
        for size in args.sizes:
            results.append(race_one(CLASSES[name], size, rows_per_batch=args.rows_per_batch))
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "race.json").write_text(json.dumps(results, indent=1))
    print_table(results)


def race_one(query: QueryClass, size: int, work: Path = WORK, rows_per_batch: int | None = None) -> dict:
    """Both engines over the same files of one class and size."""
    folder = work / f"{query.name}-{size}"
    rows = sum(_source(folder, source, size, query.name) for source in query.sources)
    row = {"class": query.name, "size": size, "rows": rows}
    print(f"race: {query.name} {rows:,} rows: flink ...", flush=True)
    row["flink"] = _measure([str(FLINK_PYTHON), str(ROOT / "tests/benchmarks/flink_race.py"),
                             str(_flink_job(folder, query))])
    print(f"race: {query.name} {rows:,} rows: lockstep ...", flush=True)
    out = folder / "runs"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    spec = _spec(folder, query, rows_per_batch)
    row["lockstep"] = _measure([sys.executable, "-m", "jobs.cli.main", "stream", str(spec), "--out", str(out), "--quiet"])
    row["batches"] = _batch_seconds(out / f"race_{query.name}" / "_state" / "batches.jsonl")
    return row


# -- inputs -------------------------------------------------------------------------------------

def _source(folder: Path, source: str, size: int, name: str) -> int:
    """Generate one source's files (once per size); return its changelog rows."""
    target, done = folder / source, folder / f"{source}.done"
    if not done.exists():
        raw = folder / f"{source}-raw"
        if source == "orders":
            generate_changelog(raw, events=size, groups=max(size // 15, 10))
        elif source == "products":
            generate_products(raw, events=size // 2, keys=max(size // 30, 10))
        else:
            generate_order_events(raw, events=size, orders=max(size // 4, 1))
        target.mkdir(parents=True, exist_ok=True)
        lines = _debezium(raw) if source != "events" else _plain(raw)
        (target / "part-00000.json").write_text("\n".join(lines) + "\n")
        done.write_text(str(len(lines)))
    data = (target / "part-00000.json").read_text().splitlines()
    return sum(2 if '"op":"u"' in line else 1 for line in data)


def _debezium(raw: Path) -> list[str]:
    """changelog-json rows as Debezium lines: -U and its +U become one update line."""
    lines, before = [], None
    for part in sorted(raw.glob("part-*.json")):
        for text in part.read_text().splitlines():
            row = json.loads(text)
            op = row.pop("op")
            if op == "-U":
                before = row
                continue
            image = {"+I": (None, row, "c"), "+U": (before, row, "u"), "-D": (row, None, "d")}[op]
            lines.append(json.dumps({"before": image[0], "after": image[1], "op": image[2]}, separators=(",", ":")))
    return lines


def _plain(raw: Path) -> list[str]:
    return [line for part in sorted(raw.glob("part-*.json")) for line in part.read_text().splitlines() if line]


def _flink_job(folder: Path, query: QueryClass) -> Path:
    tables = {"orders": {"columns": ORDERS, "primary_key": ["order_id", "pId"] if "products" in query.sources
                         else ["order_id"], "format": "debezium-json"},
              "products": {"columns": PRODUCTS, "primary_key": ["pId"], "format": "debezium-json"},
              "events": {"columns": EVENTS, "primary_key": [], "format": "json"}}
    job = {"sql": query.flink_sql, "tables": []}
    for source in query.sources:
        table = {"name": source, "path": str(folder / source), **tables[source]}
        if query.windowed:
            table["watermark"] = "order_time - INTERVAL '1' DAY"
        job["tables"].append(table)
    path = folder / "flink-job.json"
    path.write_text(json.dumps(job))
    return path


def _spec(folder: Path, query: QueryClass, rows_per_batch: int | None) -> Path:
    sources = {"orders": {"format": "debezium-json", "schema": TIMED_SCHEMA,
                          "primary_key": ["order_id", "pId"] if "products" in query.sources else ["order_id"]},
               "products": {"format": "debezium-json", "schema": PRODUCTS_SCHEMA, "primary_key": ["pId"]},
               "events": {"format": "json", "schema": ORDER_EVENTS_SCHEMA}}
    spec = {"name": f"race_{query.name}", "sql": query.spark_sql,
            "sources": {s: {"path": str(folder / s), **sources[s]} for s in query.sources}}
    if query.windowed:
        spec["sources"]["orders"].update(event_time="order_time", watermark="1 day")
        spec["sink"] = {"emit": "early"}
    if rows_per_batch:  # unset: the spec's default, sized by memory
        spec["stream"] = {"rows_per_batch": rows_per_batch}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# -- measuring ----------------------------------------------------------------------------------

def _measure(command: list[str]) -> dict:
    """Run one engine: exit code, wall seconds, peak memory of its process tree, last stderr line."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = _PeakTree(process.pid)
    peak.start()
    _, err = process.communicate()
    seconds = time.monotonic() - started
    peak.stop.set()
    peak.join()
    causes = [line for line in err.splitlines() if line.startswith("Caused by")] or err.strip().splitlines() or ["?"]
    failure = None if process.returncode == 0 else causes[-1][:300]
    return {"exit": process.returncode, "seconds": round(seconds, 2), "peak_mib": round(peak.peak / 2**20),
            "error": failure}


class _PeakTree(threading.Thread):
    """The largest resident size of a process and all its children, sampled every 0.1 s."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                tree = [self.root, *self.root.children(recursive=True)]
                self.peak = max(self.peak, sum(_rss(p) for p in tree))
            except psutil.NoSuchProcess:
                return


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def _batch_seconds(log: Path) -> dict:
    """Micro-batches and the mean seconds of the first and the last tenth of them."""
    if not log.exists():
        return {"count": 0, "first": None, "last": None}
    seconds = [json.loads(line)["seconds"] for line in log.read_text().splitlines()]
    tenth = max(1, len(seconds) // 10)
    return {"count": len(seconds), "first": round(sum(seconds[:tenth]) / tenth, 2),
            "last": round(sum(seconds[-tenth:]) / tenth, 2)}


# -- the table ----------------------------------------------------------------------------------

def marginal(small: dict, large: dict, engine: str) -> float | None:
    """Extra rows over extra seconds between two sizes: the rate with start-up taken out."""
    extra = large[engine]["seconds"] - small[engine]["seconds"]
    if extra <= 0 or small[engine]["exit"] or large[engine]["exit"]:
        return None
    return (large["rows"] - small["rows"]) / extra


def print_table(results: list[dict]) -> None:
    print("\n| class | rows | Flink s | lockstep s | Flink rows/s | lockstep rows/s | lockstep / Flink "
          "| peak MiB Flink / lockstep | micro-batches | batch s first / last tenth |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f, s, b = r["flink"], r["lockstep"], r["batches"]
        print(f"| {r['class']} | {r['rows']:,} | {_secs(f)} | {_secs(s)} | {_rate(r, f)} | {_rate(r, s)} | "
              f"{_ratio(f, s)} | {f['peak_mib']:,} / {s['peak_mib']:,} | {b['count']} | "
              f"{b['first']} / {b['last']} |")
    print("\n| class | marginal rows/s Flink | marginal rows/s lockstep | lockstep / Flink |")
    print("|---|---|---|---|")
    for name in dict.fromkeys(r["class"] for r in results):
        rows = [r for r in results if r["class"] == name]
        if len(rows) < 2:
            continue
        flink, mine = marginal(rows[0], rows[-1], "flink"), marginal(rows[0], rows[-1], "lockstep")
        ratio = f"{flink / mine:.1f}x slower" if flink and mine else "-"
        print(f"| {name} | {_num(flink)} | {_num(mine)} | {ratio} |")
    for r in results:
        for engine in ("flink", "lockstep"):
            if r[engine]["error"]:
                print(f"{r['class']} {r['rows']:,} rows: {engine} failed: {r[engine]['error']}")


def _secs(run: dict) -> str:
    return f"{run['seconds']:.1f}" if run["exit"] == 0 else f"failed ({run['exit']})"


def _ratio(flink: dict, mine: dict) -> str:
    return f"{mine['seconds'] / flink['seconds']:.1f}x" if not flink["exit"] and not mine["exit"] else "-"


def _rate(row: dict, run: dict) -> str:
    return f"{row['rows'] / run['seconds']:,.0f}" if run["exit"] == 0 else "-"


def _num(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda t: [int(n) for n in t.split(",")], default=[100_000, 400_000],
                        help="logical events per source, comma-separated (default: 100000,400000)")
    parser.add_argument("--rows-per-batch", type=int, default=None,
                        help="lockstep micro-batch rows (default: the spec's default, sized by memory)")
    parser.add_argument("--classes", type=lambda t: t.split(","), default=list(CLASSES),
                        help=f"query classes, comma-separated (default: all: {', '.join(CLASSES)})")
    return parser.parse_args()


if __name__ == "__main__":
    main()
