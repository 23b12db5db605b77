"""What one micro-batch costs when it carries almost nothing: the fixed cost per micro-batch.

Three query shapes (a group aggregate, a deduplication, an inner join: the three kinds of
emitter), each over a small changelog streamed with --rows-per-batch rows per micro-batch, on
one SparkSession (each shape runs once to warm the JVM, then --repeats times, each in a fresh
run folder). Per shape and run, the median micro-batch, split as Spark reports it (the query's
durationMs, which the stream step keeps in the run folder; a Python StreamingQueryListener would
cost each micro-batch 20-60 ms of callbacks) and as the foreachBatch handler logs it:

- bookkeeping: Spark's work around the batch: finding the new segment file (latestOffset,
  getBatch), writing the offset log (walCommit) and the commit log (commitOffsets), planning;
- handler: lockstep's foreachBatch (the emitter's Spark jobs and Arrow transfers, the MERGE);
  of it, the MERGE and the commit of the Delta sink;
- trigger: the whole micro-batch, as Spark times it.

Last, `Spark alone`: the group aggregate's staged segments streamed again, the same source and
checkpoint logs, into a foreachBatch that does nothing: Spark's own floor per micro-batch on this
machine, which no change to lockstep's handler can go below.

Each column is the median over the runs; `trigger range` is the lowest and highest run's trigger,
the run-to-run noise a change has to beat to show.

    python -m tests.benchmarks.bench_microbatch [--rows-per-batch 4] [--events 80]
        [--repeats 3] [--settings conf/settings.yaml]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
from pathlib import Path

from jobs.changelog.staging import StagedChangelog
from jobs.pipeline import Pipeline
from jobs.runtime.spark import spark_session
from jobs.stream.handler import SPARK_DURATIONS
from jobs.stream.source import changelog_stream
from tests.benchmarks.race import WORK, logged_batches
from tests.conftest import write_changelog

SHAPES = {
    "group aggregate": ("SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId", False),
    "deduplication": (
        "SELECT order_id, pId, income FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY pId "
        "ORDER BY income DESC) AS rn FROM orders) WHERE rn = 1",
        False,
    ),
    "inner join": ("SELECT o.order_id, o.income, p.name FROM orders o JOIN products p ON o.pId = p.pId", True),
}
BOOKKEEPING = ("latestOffset", "getBatch", "walCommit", "commitOffsets", "queryPlanning")


def spark_durations(pipeline: Pipeline) -> list[dict]:
    """Each micro-batch's durationMs, as Spark reported it to the stream step, which keeps it in
    the run folder (a Python listener would add its own callbacks to every micro-batch)."""
    recorded = pipeline.layout.state / SPARK_DURATIONS
    return list(json.loads(recorded.read_text()).values()) if recorded.exists() else []


def main() -> None:
    args = _arguments()
    print(
        f"{args.events} order changes, {args.rows_per_batch} rows per micro-batch; median milliseconds "
        f"per micro-batch, median of {args.repeats} run(s) after a warm-up run"
    )
    print(
        f"{'query':<18}{'batches':>8}{'trigger':>9}{'bookkeeping':>13}{'handler':>9}{'of it MERGE':>13}"
        f"{'other':>7}{'trigger range':>15}"
    )
    staged = None
    for name, (sql, joined) in SHAPES.items():
        folder = WORK / "microbatch" / name.replace(" ", "_")
        spec = _write_inputs(folder, sql, joined, args)
        runs = []
        for run in range(1 + args.repeats):  # the first run warms the JVM and is not counted
            shutil.rmtree(folder / "runs", ignore_errors=True)
            pipeline = Pipeline.open(spec, runs_dir=folder / "runs", settings_path=args.settings)
            pipeline.stream()
            if run:
                runs.append(_medians(spark_durations(pipeline), logged_batches(pipeline.layout.batches_log)))
            staged = staged or StagedChangelog(pipeline.layout.staged("orders"))
        _print_row(name, runs)
    _print_row(
        "Spark alone",
        [_spark_alone(spark_session(pipeline.settings.spark), staged, folder) for _ in range(1 + args.repeats)][1:],
    )


def _spark_alone(spark, staged: StagedChangelog, folder: Path) -> dict[str, float]:
    """One run of the staged segments, one per micro-batch as the stream reads them, into a
    foreachBatch that does nothing: what Spark alone costs per micro-batch, from the query's own
    progress."""
    checkpoint = folder / "spark_alone"
    shutil.rmtree(checkpoint, ignore_errors=True)
    query = (
        changelog_stream(spark, staged)
        .writeStream.option("checkpointLocation", str(checkpoint))
        .foreachBatch(lambda frame, batch_id: None)
        .start()
    )
    query.processAllAvailable()
    query.stop()
    return _medians([dict(p.durationMs) for p in query.recentProgress if "addBatch" in p.durationMs], [])


def _medians(spark_side: list[dict], handler: list[dict]) -> dict[str, float]:
    """One run's median micro-batch, in milliseconds, split as the table prints it."""
    trigger = _median(b.get("triggerExecution", 0) for b in spark_side)
    bookkeeping = _median(sum(b.get(k, 0) for k in BOOKKEEPING) for b in spark_side)
    ours = _median(1000 * e["seconds"] for e in handler)
    return {
        "batches": len(handler or spark_side),
        "trigger": trigger,
        "bookkeeping": bookkeeping,
        "handler": ours,
        "merge": _median(1000 * e["merge_seconds"] for e in handler),
        "other": trigger - bookkeeping - ours,
    }


def _print_row(name: str, runs: list[dict[str, float]]) -> None:
    """The median over the measured runs, and the spread of their triggers (the run-to-run noise
    a change must beat to show)."""
    of = {key: _median(run[key] for run in runs) for key in runs[0]}
    low, high = min(r["trigger"] for r in runs), max(r["trigger"] for r in runs)
    print(
        f"{name:<18}{of['batches']:>8.0f}{of['trigger']:>9.0f}{of['bookkeeping']:>13.0f}{of['handler']:>9.0f}"
        f"{of['merge']:>13.0f}{of['other']:>7.0f}{f'{low:.0f}-{high:.0f}':>15}"
    )


def _median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


def _write_inputs(folder: Path, sql: str, joined: bool, args: argparse.Namespace) -> Path:
    rng = random.Random(5)
    live: dict[int, tuple[int, int]] = {}
    changes = []
    while len(changes) < args.events:
        order = rng.randint(1, max(2, args.events // 4))
        image = (rng.randint(1, 8), rng.randint(1, 99))
        if order not in live:
            changes.append({"op": "+I", "order_id": order, "pId": image[0], "income": image[1]})
            live[order] = image
            continue
        old = live.pop(order)
        changes.append({"op": "-U", "order_id": order, "pId": old[0], "income": old[1]})
        changes.append({"op": "+U", "order_id": order, "pId": image[0], "income": image[1]})
        live[order] = image
    write_changelog(folder / "orders", "001.json", changes)
    sources = {
        "orders": {
            "path": "orders",
            "format": "changelog-json",
            "primary_key": ["order_id"],
            "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
        }
    }
    if joined:
        write_changelog(
            folder / "products", "001.json", [{"op": "+I", "pId": p, "name": f"product {p}"} for p in range(1, 9)]
        )
        sources["products"] = {
            "path": "products",
            "format": "changelog-json",
            "primary_key": ["pId"],
            "schema": "pId BIGINT, name STRING",
        }
    spec = {"name": "microbatch", "sql": sql, "sources": sources, "stream": {"rows_per_batch": args.rows_per_batch}}
    path = folder / "spec.json"  # JSON is YAML
    path.write_text(json.dumps(spec, indent=1))
    return path


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows-per-batch", type=int, default=4, help="changelog rows per micro-batch (default 4)")
    parser.add_argument("--events", type=int, default=80, help="order changes (default 80)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="measured runs per query shape, after one warm-up run (default 3)"
    )
    parser.add_argument(
        "--settings", type=Path, default=None, help="lockstep settings file (default conf/settings.yaml)"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats: at least one measured run")
    return args


if __name__ == "__main__":
    main()
