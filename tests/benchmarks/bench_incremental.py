"""What a micro-batch that touches 1 % of a large state costs, against the micro-batch that built it.

A group aggregate (SUM and COUNT per pId) over an orders changelog keyed by order_id, one order
per pId, streamed three times into one run folder by one process (one SparkSession, as a
scheduler's worker would):
- run 1: one file of --keys inserts; its micro-batch builds the whole state (the aggregation
  state and a sink of --keys rows): what a full recompute costs;
- runs 2 and 3: one more file each, an update (-U, +U) of --touched-percent of the orders, drawn
  at random (other orders in each run): one micro-batch each, which restarts the streaming query
  from its checkpoint (Spark loads the aggregation state of every key again);
- run 4: one file of three such updates, streamed with micro-batches of one update each (the
  spec's stream.rows_per_batch): its first micro-batch restarts the query as runs 2 and 3 do,
  the next two are what a query that keeps running pays, its state already loaded.

Prints the micro-batches (rows, seconds, of which the sink's MERGE), the ratio of each incremental
micro-batch to the full one (target: at most 10 %), and each run's whole time (`lockstep stream`
as a function call: the Spark session is started by run 1).

    python -m tests.benchmarks.bench_incremental [--keys 1000000] [--touched-percent 1]
        [--state-store lockstep|memory|rocksdb] [--with-max]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path
from typing import get_args

import yaml

from jobs.pipeline import Pipeline
from jobs.spec.model import StateStore
from tests.benchmarks.race import WORK, logged_batches

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId"
# --with-max: a MAX beside them, which keeps every group's live values (jobs/stream/operators/aggregate/multiset.py).
SQL_WITH_MAX = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders, MAX(income) AS top FROM orders GROUP BY pId"


def main() -> None:
    args = _arguments()
    folder = WORK / f"incremental-{args.keys}-{args.state_store}{'-max' if args.with_max else ''}"
    touched = max(1, args.keys * args.touched_percent // 100)
    sql = SQL_WITH_MAX if args.with_max else SQL
    spec = _write_spec(folder, args.state_store, sql)
    shutil.rmtree(folder / "orders", ignore_errors=True)
    shutil.rmtree(folder / "runs", ignore_errors=True)
    _write_changes(folder / "orders" / "part-0.json", _inserts(args.keys))
    pipeline = Pipeline.open(spec, runs_dir=folder / "runs", settings_path=args.settings)
    runs = [_streamed(pipeline, "run 1: build the state")]
    picked = random.Random(7).sample(range(args.keys), 5 * touched)  # different orders in each update
    updates = [picked[i * touched : (i + 1) * touched] for i in range(5)]
    for run, orders in ((2, updates[0]), (3, updates[1])):
        _write_changes(folder / "orders" / f"part-{run - 1}.json", _updates(orders, income=run))
        runs.append(_streamed(pipeline, f"run {run}: update {touched:,} of {args.keys:,} orders"))
    _write_changes(
        folder / "orders" / "part-3.json",
        (row for income, orders in enumerate(updates[2:], 4) for row in _updates(orders, income)),
    )
    one_update = Pipeline.open(
        _write_spec(folder, args.state_store, sql, rows_per_batch=2 * touched),
        runs_dir=folder / "runs",
        settings_path=args.settings,
    )
    runs.append(_streamed(one_update, f"run 4: three updates of {touched:,} orders, one per micro-batch"))
    batches = logged_batches(pipeline.layout.batches_log)
    full_batches, increments = batches[:-5], batches[-5:]
    print(f"{'micro-batch':<40}{'rows':>12}{'seconds':>10}{'of which MERGE':>16}{'/ full':>9}")
    full = sum(e["seconds"] for e in full_batches)
    labels = [
        "run 2 (query restarted)",
        "run 3 (query restarted)",
        "run 4, first (query restarted)",
        "run 4, second (query running)",
        "run 4, third (query running)",
    ]
    for label, entry in [*((f"run 1, batch {e['batch']}", e) for e in full_batches), *zip(labels, increments)]:
        print(
            f"{label:<40}{entry['rows']:>12,}{entry['seconds']:>10.2f}{entry['merge_seconds']:>16.2f}"
            f"{entry['seconds'] / full:>9.1%}"
        )
    print(
        "target: an incremental micro-batch at most 10 % of the full one; whole runs: "
        + ", ".join(f"{s:.1f} s" for s in runs)
    )


def _inserts(keys: int):
    for order in range(keys):
        yield {"order_id": order, "pId": order, "income": 1, "op": "+I"}


def _updates(orders: list[int], income: int):
    """An update of each of these orders from the inserts' image (income 1)."""
    for order in sorted(orders):
        yield {"order_id": order, "pId": order, "income": 1, "op": "-U"}
        yield {"order_id": order, "pId": order, "income": income, "op": "+U"}


def _write_changes(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.writelines(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)


def _write_spec(folder: Path, state_store: str, sql: str, rows_per_batch: int | None = None) -> Path:
    """The query's spec; with rows_per_batch, a second spec file for the same query (and run
    folder) that cuts micro-batches of that many rows."""
    spec = {
        "name": "incremental",
        "sql": sql,
        "sources": {
            "orders": {
                "path": str(folder / "orders"),
                "format": "changelog-json",
                "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
                "primary_key": ["order_id"],
            }
        },
    }
    spec["stream"] = {"state_store": state_store}
    if rows_per_batch is not None:
        spec["stream"]["rows_per_batch"] = rows_per_batch
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("spec.yaml" if rows_per_batch is None else "spec-small-batches.yaml")
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _streamed(pipeline: Pipeline, label: str) -> float:
    print(f"{label} ...", flush=True)
    started = time.monotonic()
    pipeline.stream()
    return time.monotonic() - started


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="orders, one per pId (default 1,000,000)")
    parser.add_argument("--touched-percent", type=int, default=1, help="orders updated in runs 2 and 3 (default 1)")
    parser.add_argument(
        "--state-store",
        choices=get_args(StateStore),
        default="lockstep",
        help="the spec's stream.state_store (default lockstep)",
    )
    parser.add_argument(
        "--with-max",
        action="store_true",
        help="add MAX(income) per group: a MIN / MAX / DISTINCT aggregate's value state too",
    )
    parser.add_argument(
        "--settings", type=Path, default=None, help="lockstep settings file (default conf/settings.yaml)"
    )
    return parser.parse_args()


if __name__ == "__main__":
    main()
