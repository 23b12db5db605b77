"""The lookup engine's throughput against a real HTTP dimension service.

DimensionServer (tests/support/dimension_server.py) answers every key after a fixed latency (10 ms). The
engine looks up 100,000 distinct keys, no cache (every row is a request), with capacity 100;
then a sample of 1,000 keys with capacity 1 (all 100,000 would take over 1,000 s). Prints rows
per second for both, the speed-up (target: at least 20x) and the CPU time per row of this
process. The server runs in a process of its own, so it does not compete with the engine for
this interpreter's GIL (a deployed service would not either); when the engine's CPU time per
row approaches the time per row, the CPU, not the latency, sets the pace.

    python -m tests.benchmarks.bench_lookup [--rows 100000] [--sample 1000] [--latency 0.01]
        [--capacity 100]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from contextlib import contextmanager
from multiprocessing.connection import Connection

from jobs.lookup import AsyncLookup, LookupConfig, parse_output
from tests.support.dimension_server import DimensionServer

TARGET_SPEEDUP = 20


def main() -> None:
    args = _arguments()
    with _server_process(args.rows, args.latency) as server:
        wide = _measure(server, args.capacity, args.rows)
        narrow = _measure(server, 1, args.sample)
    speedup = wide["rows_per_s"] / narrow["rows_per_s"]
    print()
    print(
        f"lookup: distinct keys (no cache: one request per row), DimensionServer answering after "
        f"{args.latency * 1000:g} ms, in a separate process, {os.cpu_count()} cores"
    )
    for run in (wide, narrow):
        print(
            f"[capacity {run['capacity']:>3}] {run['rows']:>7,} rows {run['seconds']:7.1f} s "
            f"{run['rows_per_s']:>9,.0f} rows/s  (max in flight {run['max_in_flight']}, server saw "
            f"{run['server_max']} at once; {run['cpu_ms_per_row']:.2f} ms CPU per row)"
        )
    verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
    print(f"speed-up capacity {args.capacity} / capacity 1: {speedup:.1f}x  (target >= {TARGET_SPEEDUP}x: {verdict})")


def _measure(server: RemoteServer, capacity: int, count: int) -> dict:
    config = LookupConfig(
        name="customers",
        url=server.url + "/customers/{customer_id}",
        key=("customer_id",),
        output=parse_output("name STRING, tier STRING"),
        capacity=capacity,
    )
    engine = AsyncLookup(config)
    keys = [(k,) for k in range(count)]
    server.reset_counters()
    print(f"capacity {capacity}: looking up {count:,} keys ...", flush=True)
    cpu, started = time.process_time(), time.monotonic()
    results = engine.run(keys, [False] * count)
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu
    if sum(row is not None for _, row in results) != count:
        raise SystemExit(f"capacity {capacity}: some keys came back without their row")
    return {
        "capacity": capacity,
        "rows": count,
        "seconds": seconds,
        "rows_per_s": count / seconds,
        "max_in_flight": engine.stats.max_in_flight,
        "server_max": server.max_concurrent(),
        "cpu_ms_per_row": cpu / count * 1000,
    }


class RemoteServer:
    """The parent's handle on the DimensionServer in the child process: its URL and counters."""

    def __init__(self, url: str, control: Connection):
        self.url, self._control = url, control

    def reset_counters(self) -> None:
        self._ask("reset")

    def max_concurrent(self) -> int:
        return self._ask("max_concurrent")

    def _ask(self, command: str):
        self._control.send(command)
        return self._control.recv()


@contextmanager
def _server_process(rows: int, latency: float):
    # spawn, not fork: the child starts from a clean interpreter, with no copy of this one's state.
    context = multiprocessing.get_context("spawn")
    control, child_end = context.Pipe()
    child = context.Process(target=_serve, args=(rows, latency, child_end), daemon=True, name="dimension-server")
    child.start()
    try:
        if not control.poll(30):
            raise SystemExit("the dimension server process did not start within 30 s")
        yield RemoteServer(control.recv(), control)
        control.send("stop")
    finally:
        child.join(10)
        if child.is_alive():
            child.terminate()


def _serve(rows: int, latency: float, control: Connection) -> None:
    """The child process: serve `rows` customers, answer the parent's commands until "stop"."""
    table = {str(k): {"name": f"customer {k}", "tier": ("gold", "silver", "bronze")[k % 3]} for k in range(rows)}
    with DimensionServer({"customers": table}, latency=latency) as server:
        control.send(server.url)
        while (command := control.recv()) != "stop":
            if command == "reset":
                server.reset_counters()
                control.send(None)
            elif command == "max_concurrent":
                control.send(server.max_concurrent)


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="distinct keys at full capacity")
    parser.add_argument("--sample", type=int, default=1_000, help="distinct keys at capacity 1")
    parser.add_argument("--latency", type=float, default=0.01, help="seconds per request")
    parser.add_argument("--capacity", type=int, default=100)
    return parser.parse_args()


if __name__ == "__main__":
    main()
