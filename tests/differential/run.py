"""`make differential`: random cases, lockstep against Flink SQL.

    python -m tests.differential.run [--n 300] [--seed 1] [--classes window,join] [--no-shrink]
        [--state-store lockstep|memory|rocksdb] [--engine local|spark] [--cluster] [--sources kafka]

Case i is built by the builders in turn (generate.BUILDERS) from seed*100000 + i, so a run is
the same on every machine and a failure is named by its builder and seed (`window-100012`).
Each case runs through lockstep (`run`: stream, batch, check) and through Flink; a failing case
is shrunk and saved under tests/differential/regressions/ (the test suite replays those without
Flink). The run ends with a table per query class and the line `N passed, M failed`.

With --cluster, lockstep runs on a Spark standalone cluster started for the run (a master and two
workers on 127.0.0.1, tests/support/standalone_cluster.py), the spark engine unless --engine says
otherwise: the same cases and the same oracle as on local[2]. With --sources kafka, lockstep reads
each case's changelogs from Kafka topics (a broker started for the run on 127.0.0.1, one partition
per topic), and Flink still reads the files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import get_args

from jobs.cli.local_kafka import KafkaBroker
from jobs.runtime.spark import stop_session
from jobs.spec.model import Engine, Settings, SparkSettings, StateStore
from tests.differential.case import Case
from tests.differential.compare import Finding, compare
from tests.differential.generate import BUILDERS, generate
from tests.differential.lockstep_side import run_lockstep
from tests.differential.oracle import FlinkOracle
from tests.differential.saved import load_regressions, refresh_reference, save_regression
from tests.differential.shrink import shrink
from tests.support.standalone_cluster import StandaloneCluster

# Spark's driver keeps each query's bookkeeping (the SQL tab's plan metrics, six figures of objects
# after a few dozen cases) until its SparkContext stops: a fresh session every --restart-every cases
# lets it go. The JVM itself lives as long as this process (pyspark keeps one gateway), and a run
# of a few hundred cases still slows down in its second half; --cases continues a run in a fresh
# process.
RESTART_EVERY = 50


class Differential:
    """Runs cases against one Flink oracle, in one working folder, with one Spark master."""

    def __init__(self, oracle: FlinkOracle, workdir: Path, settings: Settings, broker: KafkaBroker | None = None):
        self.oracle, self.workdir, self.settings, self.broker = oracle, workdir, settings, broker
        self.runs = 0

    def check(self, case: Case) -> tuple[Finding, dict]:
        """Each run in a folder of its own: Delta's Spark connector keeps a table's log by its
        path for the session, and a new table where a deleted one was would be read as the old."""
        reference = self.oracle.ask(case)
        self.runs += 1
        folder = self.workdir / f"lockstep-{self.runs}"
        try:
            lockstep = run_lockstep(case, folder, self.settings, self.broker)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return compare(case, lockstep, reference), reference


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.refresh:
        return _refresh()
    try:
        cases = _chosen(args)
    except ValueError as exc:
        print(f"differential: {exc}", file=sys.stderr)
        return 2
    engine = args.engine or ("spark" if args.cluster else "local")
    started = time.monotonic()
    results: dict[str, list[tuple[str, Finding]]] = defaultdict(list)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lockstep-differential-")))
        oracle = stack.enter_context(FlinkOracle(tmp))
        broker = stack.enter_context(KafkaBroker(tmp / "kafka")) if args.sources == "kafka" else None
        differential = Differential(oracle, tmp, _settings(stack, tmp, args.cluster), broker)
        for i, (builder, seed) in enumerate(cases):
            if i and i % args.restart_every == 0:
                stop_session()
            case = generate(builder, seed, args.max_rows)
            case = dataclasses.replace(case, state_store=args.state_store, engine=engine, source_kind=args.sources)
            finding = _one(differential, case, i, len(cases), args)
            results[case.query_class].append((case.name, finding))
    print(_table(results))
    failed = sum(not f.passed for found in results.values() for _, f in found)
    print(f"\n{len(cases) - failed} passed, {failed} failed ({time.monotonic() - started:.0f} s)")
    return 0 if failed == 0 else 1


def _settings(stack: contextlib.ExitStack, tmp: Path, cluster: bool) -> Settings:
    """local[2], or the master of a standalone cluster that lives as long as `stack`."""
    if not cluster:
        return Settings()
    running = stack.enter_context(StandaloneCluster(tmp / "cluster", workers=2))
    stack.callback(stop_session)  # the session's executors go before the cluster does
    print(f"differential: a standalone cluster at {running.url}, two workers", flush=True)
    return Settings(spark=SparkSettings(master=running.url))


def _refresh() -> int:
    """Ask Flink again for every saved regression case and store its answer."""
    with tempfile.TemporaryDirectory(prefix="lockstep-differential-") as tmp, FlinkOracle(Path(tmp)) as oracle:
        for regression in load_regressions():
            refresh_reference(regression, oracle.ask(regression.case))
            print(f"refreshed {regression.path}", flush=True)
    return 0


def _chosen(args) -> list[tuple[str, int]]:
    """(builder, seed) of each case: the named ones, or --n of them, the builders in turn."""
    if args.cases:
        named = [name.rsplit("-", 1) for name in args.cases.split(",")]
        if any(len(n) != 2 or n[0] not in BUILDERS or not n[1].isdigit() for n in named):
            raise ValueError(f"--cases takes names like window-300003 (builders: {', '.join(BUILDERS)})")
        return [(builder, int(seed)) for builder, seed in named]
    builders = args.classes.split(",") if args.classes else list(BUILDERS)
    unknown = set(builders) - set(BUILDERS)
    if unknown:
        raise ValueError(f"unknown class(es) {', '.join(sorted(unknown))}; known: {', '.join(BUILDERS)}")
    return [(builders[i % len(builders)], args.seed * 100_000 + i) for i in range(args.n)]


def _one(differential: Differential, case: Case, i: int, total: int, args) -> Finding:
    started = time.monotonic()
    finding, _ = differential.check(case)
    line = f"[{i + 1:>4}/{total}] {case.name:<32} {case.size:>5} rows  "
    if finding.passed:
        print(f"{line}pass ({time.monotonic() - started:.1f} s)", flush=True)
        return finding
    print(f"{line}FAIL {finding.reason}", flush=True)
    if args.shrink and not finding.reason.startswith("oracle") and not finding.refused_by_engine:
        small, small_finding = shrink(case, finding, lambda c: differential.check(c)[0], args.shrink_seconds)
        path = save_regression(small, differential.oracle.ask(small), small_finding, args.save)
        print(f"         shrunk to {small.size} rows: {path}", flush=True)
    return finding


def _table(results: dict[str, list[tuple[str, Finding]]]) -> str:
    """Per query class: cases, passed, failed, and of the failed those the engine refused."""
    header = f"{'query class':<30} {'cases':>6} {'passed':>7} {'failed':>7} {'refused':>8}  failing cases"
    lines = ["", header, "-" * len(header)]
    for query_class in sorted(results):
        found = results[query_class]
        failing = [name for name, f in found if not f.passed]
        refused = sum(f.refused_by_engine for _, f in found)
        shown = ", ".join(failing[:6]) + (f", ... ({len(failing)})" if len(failing) > 6 else "")
        lines.append(
            f"{query_class:<30} {len(found):>6} {len(found) - len(failing):>7} {len(failing):>7} {refused:>8}  {shown}"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="number of cases (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run (default 1)")
    parser.add_argument("--cases", default=None, help="comma-separated case names to run again (window-300003)")
    parser.add_argument(
        "--classes", default=None, help=f"comma-separated builders (default all: {', '.join(BUILDERS)})"
    )
    parser.add_argument("--max-rows", type=int, default=3000, help="largest changelog of a case (default 3000)")
    parser.add_argument(
        "--state-store",
        choices=get_args(StateStore),
        default="lockstep",
        help="the cases' stream.state_store: where aggregation state is kept (default lockstep)",
    )
    parser.add_argument(
        "--engine",
        choices=get_args(Engine),
        default=None,
        help="the cases' stream.engine: who runs the stateful operators (default local; spark with --cluster)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run lockstep on a Spark standalone cluster started for the run (two workers on 127.0.0.1)",
    )
    parser.add_argument(
        "--sources",
        choices=("files", "kafka"),
        default="files",
        help="where lockstep reads the changelogs: files, or Kafka topics on a broker started for the run",
    )
    parser.add_argument("--no-shrink", dest="shrink", action="store_false", help="report failures without shrinking")
    parser.add_argument("--shrink-seconds", type=float, default=600, help="time to shrink one failure (default 600)")
    parser.add_argument(
        "--restart-every",
        type=int,
        default=RESTART_EVERY,
        help=f"a fresh Spark session every this many cases (default {RESTART_EVERY})",
    )
    parser.add_argument(
        "--refresh", action="store_true", help="ask Flink again for every saved regression case and store its answer"
    )
    parser.add_argument(
        "--save",
        type=Path,
        default=Path(__file__).with_name("regressions"),
        help="where shrunk failures are saved (default tests/differential/regressions)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
