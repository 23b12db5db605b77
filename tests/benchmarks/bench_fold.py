"""lockstep's own state on its own (jobs/stream/state/live_state.py), no Spark: what a fold costs.

1. A large state: --groups groups of a group aggregate's sums (SUM and COUNT), then eight logs of
   1 % of them; the fold of those logs, its seconds and the peak memory of the process that runs
   it (a process of its own, so the peak is the fold's, not the state's building).
2. A window's state: --window-groups groups per one-hour window, each micro-batch adding to the
   current and the next window, --batches micro-batches; the seconds of every fold (every eighth
   micro-batch) and the mean of the other micro-batches' state work (reading the touched groups
   and logging), which flat figures mean do not grow with the history.

    python -m tests.benchmarks.bench_fold [--groups 10000000] [--window-groups 20000] [--batches 240]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobs.changelog.columns import COUNT, TOUCHED, WINDOW_END, WINDOW_START
from jobs.stream.operators.aggregate.group_sums import windows_first
from jobs.stream.state.live_state import COMPACT_EVERY, LiveState
from jobs.stream.state.row_counts import summed_per_group

HOUR_US = 3_600_000_000


def sums(keys: dict[str, pa.Array]) -> pa.Table:
    """One count and one sum per group, as a group aggregate logs a micro-batch's sums."""
    n = len(next(iter(keys.values())))
    ones = np.ones(n, np.int64)
    return pa.table({**keys, COUNT: ones, "__n0": ones, "__s0": ones, TOUCHED: np.zeros(n, np.int64)})


def state_of(directory: Path, keys: tuple[str, ...]) -> LiveState:
    return LiveState(directory, keys, fold=lambda rows: summed_per_group(rows, keys))


def build(directory: Path, groups: int) -> None:
    state = state_of(directory, ("g",))
    per = groups // COMPACT_EVERY
    for b in range(COMPACT_EVERY):
        state.record(sums({"g": pa.array(np.arange(b * per, (b + 1) * per, dtype=np.int64))}), b)


def fold(directory: Path, groups: int) -> None:
    """In a process of its own: eight logs of 1 % of the groups, the last of which folds."""
    state, rng = state_of(directory, ("g",)), np.random.default_rng(0)
    for b in range(COMPACT_EVERY, 2 * COMPACT_EVERY):
        touched = np.sort(rng.choice(groups, groups // 100, replace=False)).astype(np.int64)
        started = time.monotonic()
        state.record(sums({"g": pa.array(touched)}), b)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"fold of eight 1 % logs into {groups:,} groups: {time.monotonic() - started:.2f} s, peak {peak:,} MiB")


def windows(directory: Path, per_window: int, batches: int) -> None:
    keys = windows_first(("g", WINDOW_START, WINDOW_END))
    state, times = state_of(directory, keys), []
    for b in range(batches):
        starts = np.repeat(np.array([b // 2, b // 2 + 1], dtype=np.int64) * HOUR_US, per_window)
        changes = sums(
            {
                "g": pa.array(np.tile(np.arange(per_window, dtype=np.int64), 2)),
                WINDOW_START: pa.array(starts, pa.timestamp("us", "UTC")),
                WINDOW_END: pa.array(starts + HOUR_US, pa.timestamp("us", "UTC")),
            }
        )
        started = time.monotonic()
        state.rows_before(b, changes.select(list(keys)), changes.schema)
        state.record(changes, b)
        times.append(time.monotonic() - started)
    folds = [f"{times[i]:.2f}" for i in range(COMPACT_EVERY - 1, batches, COMPACT_EVERY)]
    others = np.mean([t for i, t in enumerate(times) if i % COMPACT_EVERY != COMPACT_EVERY - 1])
    print(
        f"window state, {per_window:,} groups per window, {batches} micro-batches: folds (s) {' '.join(folds)}; "
        f"other micro-batches {others:.3f} s on average"
    )


def main() -> None:
    args = _arguments()
    if args.step:  # a step run in a process of its own
        {
            "build": lambda: build(args.directory, args.groups),
            "fold": lambda: fold(args.directory, args.groups),
            "windows": lambda: windows(args.directory, args.window_groups, args.batches),
        }[args.step]()
        return
    work = Path(tempfile.mkdtemp(prefix="bench-fold-"))
    try:
        for step in ("build", "fold", "windows"):
            directory = work / ("windows" if step == "windows" else "groups")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.benchmarks.bench_fold",
                    "--step",
                    step,
                    "--directory",
                    str(directory),
                    "--groups",
                    str(args.groups),
                    "--window-groups",
                    str(args.window_groups),
                    "--batches",
                    str(args.batches),
                ],
                check=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=10_000_000, help="groups of the large state (default 10,000,000)")
    parser.add_argument("--window-groups", type=int, default=20_000, help="groups per window (default 20,000)")
    parser.add_argument("--batches", type=int, default=240, help="micro-batches of the window state (default 240)")
    parser.add_argument("--step", choices=("build", "fold", "windows"), help=argparse.SUPPRESS)
    parser.add_argument("--directory", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    main()
