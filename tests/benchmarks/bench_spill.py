"""A state larger than the driver's heap: the in-memory state store against RocksDB.

A group aggregate (SUM and COUNT per pId) over --keys orders, one per pId, so the aggregation
state holds one row per key. `lockstep stream` runs it once per state store, each in a process of
its own with the same driver heap (--driver-memory), measured as the race measures an engine:
exit code, seconds, peak memory of the process tree (proportional set sizes), and the state's
files on disk afterwards.

With `memory` (stream.state_store's default) the state lives on the JVM heap, each partition's
map plus the committed version it keeps; once that outgrows the heap the run cannot finish. With
`rocksdb` the state lives in RocksDB's files on local disk and the heap holds its caches: the run
should finish. The heap is made small rather than the state huge so that the comparison takes
minutes (the defaults: 5,000,000 keys against 1 GiB, which the in-memory state outgrows).

    python -m tests.benchmarks.bench_spill [--keys 5000000] [--driver-memory 1g]
        [--stores lockstep,memory,rocksdb] [--megabytes-per-batch 256] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import get_args

import yaml

from jobs.spec.model import StateStore
from tests.benchmarks.bench_incremental import SQL
from tests.benchmarks.race import WORK, measure


def main() -> None:
    args = _arguments()
    folder = WORK / f"spill-{args.keys}"
    orders = folder / "orders"
    if not (orders / "part-0.json").exists():
        print(f"writing {args.keys:,} inserts ...", flush=True)
        shutil.rmtree(orders, ignore_errors=True)
        _write_inserts(orders / "part-0.json", args.keys)
    settings = folder / "settings.yaml"
    settings.write_text(yaml.safe_dump({"spark": {"driver_memory": args.driver_memory}}))
    print(f"{args.megabytes_per_batch} MiB micro-batches", flush=True)
    print(f"{'store':<10}{'exit':>6}{'seconds':>10}{'peak MiB':>10}{'state MiB on disk':>19}  error")
    for store in args.stores:
        outcome = _streamed(folder, store, settings, args)
        print(
            f"{store:<10}{outcome['exit']!s:>6}{outcome['seconds']:>10.1f}{outcome['peak_mib']:>10,}"
            f"{outcome['state_mib']:>19,}  {outcome['error'] or ''}",
            flush=True,
        )


def _streamed(folder: Path, store: str, settings: Path, args: argparse.Namespace) -> dict:
    runs = folder / f"runs-{store}"
    shutil.rmtree(runs, ignore_errors=True)  # the stream is incremental: a rerun would read nothing
    command = [
        sys.executable,
        "-m",
        "jobs.cli.main",
        "stream",
        str(_spec(folder, store, args.megabytes_per_batch)),
        "--out",
        str(runs),
        "--settings",
        str(settings),
        "--quiet",
    ]
    outcome = measure(command, folder / f"lockstep-{store}", dict(os.environ), args.timeout)
    outcome["state_mib"] = round(_state_bytes(runs) / 2**20)
    return outcome


def _write_inserts(path: Path, keys: int) -> None:
    """One order per pId, each inserted once (bench_incremental's rows), written as text:
    json.dumps per row would take minutes for 50 M keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for start in range(0, keys, 1_000_000):
            out.write(
                "".join(
                    f'{{"order_id":{k},"pId":{k},"income":1,"op":"+I"}}\n'
                    for k in range(start, min(keys, start + 1_000_000))
                )
            )


def _spec(folder: Path, store: str, megabytes_per_batch: int) -> Path:
    stream = {"state_store": store, "megabytes_per_batch": megabytes_per_batch}
    spec = {
        "name": "spill",
        "sql": SQL,
        "stream": stream,
        "sources": {
            "orders": {
                "path": str(folder / "orders"),
                "format": "changelog-json",
                "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
                "primary_key": ["order_id"],
            }
        },
    }
    path = folder / f"spec-{store}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _state_bytes(runs: Path) -> int:
    """The bytes of the aggregation state's folders under a runs folder: Spark's (checkpoint/.../state)
    or lockstep's (_state/aggregate)."""
    folders = [*runs.glob("**/checkpoint*/state"), *runs.glob("**/_state/aggregate")]
    return sum(f.stat().st_size for state in folders for f in state.rglob("*") if f.is_file())


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=5_000_000, help="orders, one per pId (default 5,000,000)")
    parser.add_argument("--driver-memory", default="1g", help="the driver JVM's heap for both runs (default 1g)")
    parser.add_argument(
        "--stores",
        type=lambda text: text.split(","),
        default=list(get_args(StateStore)),
        help="state stores to run, in order (default: lockstep,memory,rocksdb)",
    )
    parser.add_argument(
        "--megabytes-per-batch",
        type=int,
        default=256,
        help="stream.megabytes_per_batch: smaller makes more micro-batches, so more folds "
        "of lockstep's state (default 256, the spec's default)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a run may take (default 1800)")
    return parser.parse_args()


if __name__ == "__main__":
    main()
