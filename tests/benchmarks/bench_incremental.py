"""What a micro-batch that touches 1 % of a large state costs, against the micro-batch that built it.

A group aggregate (SUM and COUNT per pId) over an orders changelog keyed by order_id, one order
per pId:
- run 1, `lockstep stream`: one file of --keys inserts; its micro-batches build the whole state
  (the aggregation state and a sink of --keys rows): what a full recompute costs;
- run 2, `lockstep stream` again on the same run folder, after one more file: an update (-U, +U)
  of --touched-percent of the orders, drawn at random, one micro-batch.

Prints both runs' micro-batches (rows, seconds, of which the sink's MERGE), the ratio of the
incremental micro-batch to the full one (target: at most 10 %), and each run's whole process time.

    python -m tests.benchmarks.bench_incremental [--keys 1000000] [--touched-percent 1]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.benchmarks.race import WORK

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId"
ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    args = _arguments()
    folder = WORK / f"incremental-{args.keys}"
    touched = max(1, args.keys * args.touched_percent // 100)
    spec = _write_spec(folder)
    _write_changes(folder / "orders" / "part-0.json", _inserts(args.keys))
    (folder / "orders" / "part-1.json").unlink(missing_ok=True)
    runs = folder / "runs"
    subprocess.run(["rm", "-rf", str(runs)], check=True)
    full = _stream(spec, runs, "run 1: build the state")
    _write_changes(folder / "orders" / "part-1.json", _updates(args.keys, touched))
    incremental = _stream(spec, runs, f"run 2: update {touched:,} of {args.keys:,} orders")
    batches = _batches(runs)
    first, last = batches[:-1], batches[-1]
    print(f"{'micro-batch':<32}{'rows':>12}{'seconds':>10}{'of which MERGE':>16}")
    for label, entry in [*((f"run 1, batch {e['batch']}", e) for e in first), ("run 2 (1 % of the keys)", last)]:
        print(f"{label:<32}{entry['rows']:>12,}{entry['seconds']:>10.2f}{entry['merge_seconds']:>16.2f}")
    full_batch = sum(e["seconds"] for e in first)
    print(f"incremental / full: {last['seconds'] / full_batch:.1%} (target: at most 10 %); whole processes: "
          f"run 1 {full:.1f} s, run 2 {incremental:.1f} s")


def _inserts(keys: int):
    for order in range(keys):
        yield {"order_id": order, "pId": order, "income": 1, "op": "+I"}


def _updates(keys: int, touched: int):
    for order in sorted(random.Random(7).sample(range(keys), touched)):
        yield {"order_id": order, "pId": order, "income": 1, "op": "-U"}
        yield {"order_id": order, "pId": order, "income": 2, "op": "+U"}


def _write_changes(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.writelines(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)


def _write_spec(folder: Path) -> Path:
    spec = {"name": "incremental", "sql": SQL, "sources": {"orders": {
        "path": str(folder / "orders"), "format": "changelog-json",
        "schema": "order_id BIGINT, pId BIGINT, income BIGINT", "primary_key": ["order_id"]}}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _stream(spec: Path, runs: Path, label: str) -> float:
    print(f"{label} ...", flush=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "jobs.cli.main", "stream", str(spec), "--out", str(runs)],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def _batches(runs: Path) -> list[dict]:
    log = runs / "incremental" / "_state" / "batches.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="orders, one per pId (default 1,000,000)")
    parser.add_argument("--touched-percent", type=int, default=1, help="orders updated in run 2 (default 1)")
    return parser.parse_args()


if __name__ == "__main__":
    main()
