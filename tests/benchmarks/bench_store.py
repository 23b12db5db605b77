"""What a run folder on an object store costs, against the same run on the local disk, in one run.

A group aggregate's stream step over a changelog of N micro-batches, once into a local runs folder
and once into s3a:// on a local S3 server (SeaweedFS, jobs/cli/local_store.py), on one
SparkSession warmed by a small step of each kind first; then a second step over one more file (M
micro-batches), the incremental case, and a third with nothing new on a host without the working
copy (all of it restored from the store). Per step: seconds on disk and on the store, the store's
part (restoring the working copy, committing it), its requests and the bytes put. The last line
divides the difference between two sizes by their difference in micro-batches: the cost one more
micro-batch adds on the store.

    python -m tests.benchmarks.bench_store [--sizes 10,60] [--rows-per-batch 50] [--keys 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from jobs.cli.local_store import LocalS3Server
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.progress import Progress
from jobs.runtime.spark import spark_session
from jobs.spec import load_settings, load_spec
from tests.conftest import orders_spec, write_changelog

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"


def changes(count: int, keys: int, rng: random.Random, live: dict) -> list[dict]:
    rows = []
    while len(rows) < count:
        order = rng.randint(1, keys * 4)
        new = {"order_id": order, "pId": rng.randint(1, keys), "income": rng.randint(1, 100)}
        if order in live:
            rows += [{**live[order], "op": "-U"}, {**new, "op": "+U"}]
        else:
            rows.append({**new, "op": "+I"})
        live[order] = new
    return rows


def measure(spec: Path, settings, out: Path | str) -> dict:
    pipeline = Pipeline.of(plan_query(load_spec(spec)), settings, out, Progress(quiet=True))
    started = time.monotonic()
    result = pipeline.stream()
    seconds = time.monotonic() - started
    cost = pipeline.store_folder.cost if pipeline.store_folder else None
    figures = {"seconds": seconds, "batches": result.batches if result else 0}
    if cost is not None:
        figures.update(
            restore=cost.restore_seconds, commit=cost.commit_seconds, requests=cost.requests, mib=cost.bytes_put / 2**20
        )
        pipeline.store_folder.cost.__init__()  # the next step counts afresh
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,60", help="micro-batches of the first step, per run")
    parser.add_argument("--more", type=int, default=5, help="micro-batches of the second, incremental step")
    parser.add_argument("--rows-per-batch", type=int, default=50)
    parser.add_argument("--keys", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    rows = []
    try:
        with LocalS3Server(work / "server") as server:
            server.create_bucket("bench")
            env = server.environment()
            base = load_settings()
            store = base.store.model_copy(
                update={
                    "endpoint": server.endpoint,
                    "access_key_id": env["AWS_ACCESS_KEY_ID"],
                    "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                    "work_dir": work / "copies",
                }
            )
            settings = base.model_copy(update={"store": store})
            spark_session(settings.spark)  # started once, before anything is timed
            warm = work / "warm-up"
            write_changelog(
                warm / "orders", "001.json", changes(4 * args.rows_per_batch, args.keys, random.Random(0), {})
            )
            warm_spec = orders_spec(warm, SQL, rows_per_batch=args.rows_per_batch, name="warm")
            measure(warm_spec, settings, work / "warm-local")  # the JVM's first micro-batches are slower
            measure(warm_spec, settings, "s3a://bench/warm")
            for size in map(int, args.sizes.split(",")):
                rng, live = random.Random(size), {}
                folder = work / f"n{size}"
                write_changelog(
                    folder / "orders", "001.json", changes(size * args.rows_per_batch, args.keys, rng, live)
                )
                spec = orders_spec(folder, SQL, rows_per_batch=args.rows_per_batch, name=f"q{size}")
                for step in ("first", "incremental", "new host"):
                    if step == "incremental":
                        more = changes(args.more * args.rows_per_batch, args.keys, rng, live)
                        write_changelog(folder / "orders", "002.json", more)
                    if step == "new host":  # nothing new, and no working copy: all of it from the store
                        shutil.rmtree(work / "copies" / "bench")
                    local = measure(spec, settings, work / "local")
                    remote = measure(spec, settings, "s3a://bench/runs")
                    rows.append((size, step, local, remote))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(rows)


def print_table(rows: list) -> None:
    columns = ("step", "micro-batches", "local disk s", "store s", "store - local s", "restore s", "commit s")
    print("| " + " | ".join((*columns, "requests", "MiB put")) + " |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for _size, step, local, remote in rows:
        print(
            f"| {step} | {remote['batches']} | {local['seconds']:.1f} | {remote['seconds']:.1f} | "
            f"{remote['seconds'] - local['seconds']:+.1f} | {remote['restore']:.2f} | {remote['commit']:.2f} | "
            f"{remote['requests']:,} | {remote['mib']:.2f} |"
        )
    firsts = [(local, remote) for _s, step, local, remote in rows if step == "first"]
    if len(firsts) >= 2:
        (l1, r1), (l2, r2) = firsts[0], firsts[-1]
        batches = r2["batches"] - r1["batches"]
        extra = ((r2["seconds"] - l2["seconds"]) - (r1["seconds"] - l1["seconds"])) / batches
        print(
            f"\none more micro-batch on the store: {(r2['requests'] - r1['requests']) / batches:.1f} requests, "
            f"{(r2['commit'] - r1['commit']) / batches * 1000:.0f} ms of commit, {extra * 1000:+.0f} ms of the "
            f"whole step against the local disk"
        )


if __name__ == "__main__":
    main()
