"""An interval join's state that ends (jobs/stream/operators/join/expiry.py), side by side with the
same join written so that it is a regular join (the time bounds as two comparisons, which the
planner does not read as an interval), in one run: the stream step's seconds and the rows and bytes
its state holds at the end. Both give the same rows (the check passes for both).

Orders and shipments, insert-only, one shipment 4 s after most orders, --keys join keys, event
time advancing 1 s per order, --rows per side, --batch rows per micro-batch, on the local engine
or (--engine spark) on Spark's keyed state, where rows leave by LiveRows' event-time timers.
The state rows are the report's figures: the live rows after the last micro-batch, and the most
after any.

    python -m tests.benchmarks.bench_interval_join [--rows 100000] [--keys 100] [--batch 10000] [--engine local]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from expectations.check import run_check
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings

INTERVAL = "o.ts BETWEEN s.ts - INTERVAL 10 SECONDS AND s.ts + INTERVAL 5 SECONDS"
COMPARISONS = "o.ts >= s.ts - INTERVAL 10 SECONDS AND o.ts <= s.ts + INTERVAL 5 SECONDS"
START = datetime(2026, 11, 21, 9, 0, 0)


def write_sources(folder: Path, rows: int, keys: int) -> None:
    for name, offset, kept in (("orders", 0, lambda i: True), ("shipments", 4, lambda i: i % 5 != 0)):
        (folder / name).mkdir(parents=True)
        with open(folder / name / "001.json", "w") as out:
            for i in range(rows):
                if kept(i):
                    ts = (START + timedelta(seconds=i + offset)).isoformat(sep=" ")
                    out.write(json.dumps({"id": i, "k": i % keys, "ts": ts}) + "\n")


def spec_file(folder: Path, name: str, condition: str, batch: int, engine: str) -> Path:
    source = {
        "format": "json",
        "schema": "id BIGINT, k BIGINT, ts TIMESTAMP",
        "event_time": "ts",
        "watermark": "2 seconds",
    }
    spec = {
        "name": name,
        "sql": "SELECT o.id AS order_id, s.id AS shipment_id FROM orders o JOIN shipments s "
        f"ON o.k = s.k AND {condition}",
        "sources": {"orders": {"path": "orders", **source}, "shipments": {"path": "shipments", **source}},
        "stream": {"rows_per_batch": batch, "engine": engine},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def measure(spec: Path, out: Path) -> dict:
    plan = plan_query(load_spec(spec))
    pipeline = Pipeline.of(plan, Settings(), out, Progress(quiet=True))
    started = time.monotonic()
    result = pipeline.stream()
    seconds = time.monotonic() - started
    pipeline.batch()
    report = run_check(plan, Settings(), pipeline.layout).to_json()
    assert result is not None
    held = [batch["state_rows"] for batch in report["micro_batches"] if batch.get("state_rows") is not None]
    # lockstep's state files; Spark's RocksDB checkpoint keeps earlier versions too: not comparable
    files = list(pipeline.layout.operator_state.rglob("*.parquet"))
    size = sum(p.stat().st_size for p in files) if files else None
    return {
        "stream": seconds,
        "rows": held[-1],
        "peak": max(held),
        "bytes": size,
        "input": result.input_rows,
        "verdict": report["verdict"],
    }


def _warm_up(folder: Path, engine: str) -> None:
    """One small run first, not counted: the first query of a Spark session also pays for the
    session's start and the JVM's first compilations (about 20 s on the spark engine)."""
    write_sources(folder, 1_000, 10)
    measure(spec_file(folder, "warm_up", INTERVAL, 500, engine), folder / "runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows per side (default 100,000)")
    parser.add_argument("--keys", type=int, default=100, help="join keys (default 100)")
    parser.add_argument("--batch", type=int, default=10_000, help="rows per micro-batch (default 10,000)")
    parser.add_argument("--engine", choices=("local", "spark"), default="local", help="stream engine (default local)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-interval-") as tmp:
        folder = Path(tmp)
        _warm_up(folder / "warm-up", args.engine)
        write_sources(folder, args.rows, args.keys)
        specs = {
            "interval join (state ends)": spec_file(folder, "interval", INTERVAL, args.batch, args.engine),
            "regular join (same rows)": spec_file(folder, "regular", COMPARISONS, args.batch, args.engine),
        }
        figures = {name: measure(spec, folder / "runs") for name, spec in specs.items()}
    shipments = args.rows * 4 // 5
    print(
        f"\n{args.rows:,} orders, {shipments:,} shipments, {args.keys} keys, {args.batch:,} rows per micro-batch, "
        f"{args.engine} engine\n"
    )
    print(
        "| join | input rows | stream step s | state rows at the end | most state rows | state on disk MiB | verdict |"
    )
    print("|---|--:|--:|--:|--:|--:|---|")
    for name, f in figures.items():
        mib = "–" if f["bytes"] is None else f"{f['bytes'] / 2**20:.1f}"
        print(
            f"| {name} | {f['input']:,} | {f['stream']:.1f} | {f['rows']:,} | {f['peak']:,} | {mib} "
            f"| {f['verdict'].upper()} |"
        )


if __name__ == "__main__":
    main()
