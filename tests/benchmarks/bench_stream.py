"""`make bench`: the large generated changelog through the stream, batch and check steps.

Prints changelog events per second for the stream step (cold: the first streaming query of a new
JVM; warm: the same run again in a fresh run folder on the now-warm session, as a long-running
service would see it), the batch step and the whole run, and the peak memory of the driver
(Python process + Spark JVM, sampled every 0.2 s). Then the same changelog through a one-minute
tumbling window query (event times over a day, emit early, a watermark of a day so that nothing is
late), warm, and the window path's cost per event relative to the group aggregate's.

Then two multi-operator workloads on the warm session (sources from tests/benchmarks/workloads.py),
each with its stream, batch and check steps and a row-for-row comparison of the two Delta tables:
- a join of an orders changelog (generate_changelog) with a products changelog keyed by pId, both
  with updates and deletes, over the same products. The planner keeps no key through a join
  when a side's key does not contain its join key, so orders keyed by order_id alone leave the
  output without an upsert key; the join is measured with orders keyed by (order_id, pId) (no
  materializer), as a LEFT JOIN the same way, and as written with orders keyed by order_id into
  a sink keyed by order_id (the upsert materializer runs);
- a deduplication (latest row per order_id) then COUNT(DISTINCT) per company, over an insert-only
  json source: two chained stages, the aggregate reading the dedup table's change feed. The
  micro-batch seconds of each stage are printed, to see which one the time goes to.

Last, the sink writers side by side on the same two workloads (the group query, and dedup then
aggregate, whose second stage reads the first's change feed): each writer's stream step, its
throughput, and the share of the stream step spent in the writer once a micro-batch's changes were
computed (its no-op filter and MERGE commit, `merge_seconds` in the batches log).

    python -m tests.benchmarks.bench_stream [--events 300000] [--rows-per-batch 50000]
        [--join-events 200000] [--join-keys 20000] [--dedup-events 200000] [--dedup-orders 50000]
        [--writers delta-rs,delta-spark]
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
from pathlib import Path

import psutil
import yaml

from jobs.changelog.generate import TIMED_SCHEMA, generate_changelog
from tests.benchmarks.memory import SAMPLE_SECONDS, tree_memory
from tests.benchmarks.workloads import ORDER_EVENTS_SCHEMA, PRODUCTS_SCHEMA, generate_order_events, generate_products

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "state" / "bench"
GROUP_SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId"
WINDOW_SQL = (
    "SELECT pId, window.start AS minute, SUM(income) AS total, COUNT(*) AS orders "
    "FROM orders GROUP BY pId, window(order_time, '1 minute')"
)
JOIN_SQL = "SELECT o.order_id, o.pId, o.income, p.name FROM orders o JOIN products p ON o.pId = p.pId"
LEFT_JOIN_SQL = JOIN_SQL.replace(" JOIN ", " LEFT JOIN ")
DEDUP_SQL = (
    "SELECT company, COUNT(DISTINCT order_id) AS n FROM (SELECT order_id, company, seq FROM "
    "(SELECT order_id, company, seq, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY seq DESC) "
    "AS rn FROM events) t WHERE rn = 1) d GROUP BY company"
)


class PeakMemory(threading.Thread):
    """Peak memory of this process plus its children (the Spark JVM), see memory.py."""

    def __init__(self):
        super().__init__(daemon=True)
        # Not `_stop`: that would shadow Thread._stop(), which Python calls in a forked child.
        self.peak, self._done = 0, threading.Event()

    def run(self):
        me = psutil.Process()
        while not self._done.is_set():
            self.peak = max(self.peak, tree_memory(me))
            time.sleep(SAMPLE_SECONDS)

    def stop(self) -> int:
        self._done.set()
        return self.peak

    def take(self) -> int:
        """The peak since the last take (or the start), then start over."""
        peak, self.peak = self.peak, 0
        return peak


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
    peak = memory.take()
    joins = {
        label: _run(spec, settings, label, compare=True) | {"peak": memory.take()}
        for label, spec in _join_specs(args).items()
    }
    dedup = _run(_dedup_spec(args), settings, "dedup_agg", compare=True) | {"peak": memory.take()}
    workloads = {"group": spec, "dedup_agg": _dedup_spec(args)}
    writers = {
        (writer, label): _run(path, settings, f"{label}_{writer}", compare=True, writer=writer)
        for writer in args.writers
        for label, path in workloads.items()
    }
    peak_all = max([peak, dedup["peak"], memory.stop()] + [r["peak"] for r in joins.values()])
    rows = cold["rows"]
    print()
    print(
        f"changelog: {rows:,} events ({args.events:,} logical; updates are -U/+U pairs), "
        f"micro-batches of {args.rows_per_batch:,} rows, 2 cores"
    )
    print(f"group query: {GROUP_SQL}")
    print(f"window query: {WINDOW_SQL}")
    print(f"spark session start            {spark_up:7.1f} s")
    for label, r in (("cold", cold), ("warm", warm)):
        print(
            f"[{label}] stream step ({r['batches']} micro-batches) {r['stream']:7.1f} s  "
            f"{rows / r['stream']:>9,.0f} events/s"
        )
        print(f"[{label}] batch step                  {r['batch']:7.1f} s  {rows / r['batch']:>9,.0f} events/s")
        print(f"[{label}] check step                  {r['check']:7.1f} s")
        print(
            f"[{label}] whole run                   {r['total']:7.1f} s  {rows / r['total']:>9,.0f} events/s"
            f"  verdict {r['verdict']}"
        )
    print(
        f"[window] stream step ({window['batches']} micro-batches) {window['stream']:7.1f} s  "
        f"{rows / window['stream']:>9,.0f} events/s  ({window['stream'] / warm['stream']:.2f}x the "
        f"warm group aggregate per event)  verdict {window['verdict']}"
    )
    print(f"peak driver memory (python + JVM RSS) {peak / 2**20:,.0f} MiB")
    _print_joins(args, joins)
    _print_dedup(args, dedup)
    _print_writers(writers)
    print(f"peak driver memory, all workloads {peak_all / 2**20:,.0f} MiB")


def _print_writers(runs: dict) -> None:
    print()
    print(
        "sink writers on the same workloads (warm session); MERGE = time in the writer after the changes were computed"
    )
    print(
        f"{'writer':<12} {'workload':<10} {'stream s':>9} {'events/s':>10} {'MERGE s':>8} {'MERGE share':>11}  verdict"
    )
    for (writer, label), r in runs.items():
        merge = sum(stage["merge_seconds"] for stage in r["stages"])
        print(
            f"{writer:<12} {label:<10} {r['stream']:9.1f} {r['events'] / r['stream']:10,.0f} {merge:8.1f} "
            f"{merge / r['stream']:11.0%}  {r['verdict']}, {'stream == batch' if r['same'] else 'stream != batch'}"
        )


def _print_joins(args, joins: dict) -> None:
    print()
    print(
        f"join: orders ({args.join_events:,} logical events) and products ({args.join_events:,} "
        f"logical events), both with -U/+U updates and deletes, over {args.join_keys:,} join keys; "
        f"events/s counts the changelog rows of both sides"
    )
    print(f"join query: {JOIN_SQL}  (left_join: LEFT JOIN)")
    print("  join, left_join: orders keyed by (order_id, pId), so is the sink; no materializer")
    print("  join_materialized: orders keyed by order_id, sink.primary_key [order_id], upsert materializer")
    for label, r in joins.items():
        _print_steps(label, r)


def _print_dedup(args, r: dict) -> None:
    print()
    print(
        f"dedup then aggregate: {args.dedup_events:,} json insert events over {args.dedup_orders:,} "
        f"order ids, 2 chained stages"
    )
    print(f"dedup query: {DEDUP_SQL}")
    _print_steps("dedup_agg", r)


def _print_steps(label: str, r: dict) -> None:
    events = r["events"]
    print(
        f"[{label}] stream step ({r['batches']} micro-batches) {r['stream']:7.1f} s  "
        f"{events / r['stream']:>9,.0f} events/s  ({events:,} input rows)"
    )
    for stage in r["stages"]:
        print(
            f"[{label}]   {stage['name']}: {stage['batches']} micro-batches, {stage['rows']:,} rows in, "
            f"{stage['seconds']:.1f} s in micro-batches"
        )
    outside = r["stream"] - sum(stage["seconds"] for stage in r["stages"])
    print(f"[{label}]   outside micro-batches (staging, query start) {outside:.1f} s")
    print(f"[{label}] batch step                  {r['batch']:7.1f} s  {events / r['batch']:>9,.0f} events/s")
    print(f"[{label}] check step                  {r['check']:7.1f} s")
    same = "stream == batch row for row" if r["same"] else "stream != batch"
    print(
        f"[{label}] whole run                   {r['total']:7.1f} s  {events / r['total']:>9,.0f} events/s"
        f"  verdict {r['verdict']}, {same} ({r['result_rows']:,} rows)"
    )
    print(f"[{label}] peak driver memory          {r['peak'] / 2**20:7,.0f} MiB")


def _run(spec: Path, settings, label: str, compare: bool = False, writer: str | None = None) -> dict:
    from expectations.check import run_check
    from jobs.batch.job import run_batch
    from jobs.plan import plan_query
    from jobs.runtime.layout import RunLayout
    from jobs.runtime.progress import Progress
    from jobs.spec import load_spec, with_overrides
    from jobs.stream.job import run_stream

    plan = plan_query(with_overrides(load_spec(spec), writer=writer))
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
    run = {
        "rows": stream.input_rows,
        "batches": stream.batches,
        "stream": t1 - t0,
        "batch": t2 - t1,
        "check": t3 - t2,
        "total": t3 - t0,
        "verdict": report.verdict,
    }
    if compare:
        stream_rows, batch_rows = _table_rows(layout.stream), _table_rows(layout.batch)
        run.update(
            events=sum(s.total_rows for s in stream.staged),
            same=stream_rows == batch_rows,
            result_rows=len(batch_rows),
            stages=_stage_figures(layout, plan.spec.name),
        )
    return run


def _table_rows(path: Path) -> list[tuple]:
    from deltalake import DeltaTable

    rows = [tuple(r.values()) for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist()]
    return sorted(rows, key=lambda row: tuple((v is None, v) for v in row))


def _stage_figures(layout, final: str) -> list[dict]:
    """Micro-batches, input rows and micro-batch seconds of each stage, from its batches log."""
    logs = [(p.parent.parent.name, p) for p in sorted(layout.root.glob("stages/*/_state/batches.jsonl"))]
    figures = []
    for name, log in logs + [(final, layout.batches_log)]:
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        figures.append(
            {
                "name": name,
                "batches": len(entries),
                "rows": sum(e["rows"] for e in entries),
                "seconds": sum(e["seconds"] for e in entries),
                "merge_seconds": sum(e.get("merge_seconds", 0.0) for e in entries),
            }
        )
    return figures


def _spec(data: Path, sql: str, rows_per_batch: int, windowed: bool = False) -> Path:
    source = {
        "path": str(data),
        "format": "changelog-json",
        "primary_key": ["order_id"],
        "schema": TIMED_SCHEMA,
    }  # the generated rows carry order_time
    spec = {
        "name": "bench_window" if windowed else "bench",
        "sql": sql,
        "sources": {"orders": source},
        "stream": {"rows_per_batch": rows_per_batch},
    }
    if windowed:
        source.update(event_time="order_time", watermark="1 day")
        spec["sink"] = {"emit": "early"}
    return _write_spec(spec)


def _join_specs(args) -> dict[str, Path]:
    orders = WORK / f"join-orders-{args.join_events}-{args.join_keys}"
    products = WORK / f"join-products-{args.join_events}-{args.join_keys}"
    if not orders.exists():
        print(f"generating {args.join_events:,} order events into {orders} ...", flush=True)
        generate_changelog(orders, events=args.join_events, groups=args.join_keys)
    if not products.exists():
        print(f"generating {args.join_events:,} product events into {products} ...", flush=True)
        generate_products(products, events=args.join_events, keys=args.join_keys)

    def spec(name: str, sql: str, orders_key: list[str], sink: dict | None = None) -> Path:
        sources = {
            "orders": {
                "path": str(orders),
                "format": "changelog-json",
                "schema": TIMED_SCHEMA,
                "primary_key": orders_key,
            },
            "products": {
                "path": str(products),
                "format": "changelog-json",
                "schema": PRODUCTS_SCHEMA,
                "primary_key": ["pId"],
            },
        }
        return _write_spec(
            {
                "name": name,
                "sql": sql,
                "sources": sources,
                **({"sink": sink} if sink else {}),
                "stream": {"rows_per_batch": args.rows_per_batch},
            }
        )

    return {
        "join": spec("bench_join", JOIN_SQL, ["order_id", "pId"]),
        "left_join": spec("bench_left_join", LEFT_JOIN_SQL, ["order_id", "pId"]),
        "join_materialized": spec(
            "bench_join_materialized", JOIN_SQL, ["order_id"], sink={"primary_key": ["order_id"]}
        ),
    }


def _dedup_spec(args) -> Path:
    events = WORK / f"dedup-events-{args.dedup_events}-{args.dedup_orders}"
    if not events.exists():
        print(f"generating {args.dedup_events:,} order events into {events} ...", flush=True)
        generate_order_events(events, events=args.dedup_events, orders=args.dedup_orders)
    source = {"path": str(events), "format": "json", "schema": ORDER_EVENTS_SCHEMA}
    return _write_spec(
        {
            "name": "bench_dedup_agg",
            "sql": DEDUP_SQL,
            "sources": {"events": source},
            "stream": {"rows_per_batch": args.rows_per_batch},
        }
    )


def _write_spec(spec: dict) -> Path:
    path = WORK / f"{spec['name']}.yaml"
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--rows-per-batch", type=int, default=50_000)
    parser.add_argument("--join-events", type=int, default=200_000, help="logical events per join side")
    parser.add_argument("--join-keys", type=int, default=20_000)
    parser.add_argument("--dedup-events", type=int, default=200_000)
    parser.add_argument("--dedup-orders", type=int, default=50_000, help="distinct order ids")
    parser.add_argument(
        "--writers",
        type=lambda text: text.split(","),
        default=["delta-rs", "delta-spark"],
        help="sink writers to compare, comma-separated",
    )
    return parser.parse_args()


if __name__ == "__main__":
    main()
