"""What a run folder on an object store costs on a Spark standalone cluster, against a local run
folder on the same cluster, in one run.

A master and two workers on this machine (tests/support/standalone_cluster.py) and a local S3
server (SeaweedFS). A group aggregate's `lockstep stream` over N micro-batches runs on the spark
engine twice: into a local runs folder, and into s3a:// (the executors write the checkpoint and
the sink at the run folder's keys, the driver commits its working copy after each micro-batch).
Each is its own process, as a scheduled step is. Per run: the step's seconds, and from Spark's
figures per micro-batch (`_state/spark_durations.json`, the first micro-batch left out: it warms
the executors) the median micro-batch and the median of Spark's two checkpoint writes (the offset
log entry and the commit log entry).

    python -m tests.benchmarks.bench_store_cluster [--batches 12] [--rows-per-batch 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobs.cli.local_store import LocalS3Server
from tests.benchmarks.bench_store import SQL, changes
from tests.conftest import ROOT, orders_spec, write_changelog
from tests.support.standalone_cluster import StandaloneCluster


def stream(spec: Path, out: str, master: str, settings: Path, env: dict) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "jobs.cli.main", "stream", str(spec), "--out", out, "--master", master]
        + ["--settings", str(settings), "--quiet"],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
    )
    return time.monotonic() - started


def micro_batches(state: Path) -> dict:
    """Medians over the micro-batches after the first, in milliseconds."""
    durations = json.loads((state / "spark_durations.json").read_text())
    later = [durations[b] for b in sorted(durations, key=int)[1:]]
    return {
        "count": len(durations),
        "micro-batch": statistics.median(d["triggerExecution"] for d in later),
        "checkpoint": statistics.median(d["walCommit"] + d["commitOffsets"] for d in later),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--rows-per-batch", type=int, default=50)
    parser.add_argument("--keys", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-store-cluster-"))
    changelog = changes(args.batches * args.rows_per_batch, args.keys, random.Random(1), {})
    write_changelog(work / "orders", "001.json", changelog)
    spec = orders_spec(work, SQL, rows_per_batch=args.rows_per_batch, stream={"engine": "spark"})
    settings = work / "settings.yaml"
    settings.write_text(f"store:\n  work_dir: {work / 'copies'}\n")
    try:
        with LocalS3Server(work / "server") as server, StandaloneCluster(work / "cluster", workers=2) as cluster:
            server.create_bucket("bench")
            env = server.environment()
            local_seconds = stream(spec, str(work / "local"), cluster.url, settings, env)
            store_seconds = stream(spec, "s3a://bench/runs", cluster.url, settings, env)
            local = micro_batches(work / "local" / "q" / "_state")
            store = micro_batches(work / "copies" / "bench" / "runs" / "q" / "_state")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| run folder | micro-batches | step s | median micro-batch ms | median checkpoint writes ms |")
    print("|---|--:|--:|--:|--:|")
    for name, seconds, figures in (("local disk", local_seconds, local), ("store (s3a://)", store_seconds, store)):
        print(
            f"| {name} | {figures['count']} | {seconds:.1f} | {figures['micro-batch']:,.0f} | "
            f"{figures['checkpoint']:,.0f} |"
        )


if __name__ == "__main__":
    main()
