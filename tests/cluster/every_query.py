"""`make cluster-queries`: every demo query on a standalone cluster under the spark engine, against
the local engine on local[2].

A master and two workers start on 127.0.0.1 (tests/support/standalone_cluster.py). `lockstep demo`
runs the demo's queries (conf/queries, their own sizes and micro-batches) twice: `--engine local`
on local[2], then `--engine spark` on the cluster. Per query it compares the verdicts, the sink
tables row for row (floating columns within the checks' tolerance) and the batch tables, and
prints a table; exit 1 when any query differs. The two demos run one after the other: each serves
the dimension tables on the same port.

The differential generator's classes run on the cluster through the differential harness itself,
against Flink: `make differential CLUSTER=1` (tests/differential/run.py --cluster).

    python -m tests.cluster.every_query [--queries conf/queries] [--work state/cluster-queries]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.integration.conftest import same_rows, table_rows
from tests.integration.test_cli import lockstep
from tests.support.standalone_cluster import StandaloneCluster

RUNS = ("local", "cluster")


def run_demos(queries: Path, work: Path, cluster: StandaloneCluster) -> dict[str, float]:
    """Both demos into work/local and work/cluster; their wall seconds. Exit 1 (a failing verdict)
    is compared below; anything else stops here."""
    seconds = {}
    for run, options in (("local", ["--master", "local[2]", "--engine", "local"]),
                         ("cluster", ["--master", cluster.url, "--engine", "spark"])):  # fmt: skip
        print(f"cluster-queries: lockstep demo {' '.join(options)}", flush=True)
        started = time.monotonic()
        done = lockstep("demo", "--queries", queries, "--out", work / run, "--quiet", *options, cwd=work, timeout=7200)
        seconds[run] = time.monotonic() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"cluster-queries: the {run} demo exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds


def compare(work: Path, name: str) -> dict:
    """One query's row: both verdicts, the sink's rows, and whether sink and batch tables agree."""
    reports = [json.loads((work / run / name / "report.json").read_text()) for run in RUNS]
    tables = {part: [table_rows(work / run / name / part) for run in RUNS] for part in ("stream", "batch")}
    engine = (work / "cluster" / name / "_state" / "engine").read_text().strip()
    return {
        "query": name,
        "verdicts": [r["verdict"] for r in reports],
        "engine": engine,
        "sink_rows": len(tables["stream"][1]),
        "same": all(same_rows(*pair) for pair in tables.values()) and reports[0]["verdict"] == reports[1]["verdict"],
    }


def print_table(rows: list[dict], seconds: dict[str, float]) -> None:
    print(f"\n{'query':<22} {'local':>7} {'cluster':>8} {'engine':>7} {'sink rows':>10}  same sink, batch, verdict")
    for row in rows:
        local, cluster = row["verdicts"]
        print(
            f"{row['query']:<22} {local:>7} {cluster:>8} {row['engine']:>7} {row['sink_rows']:>10,}  "
            f"{'yes' if row['same'] else 'NO'}"
        )
    print(f"\nlocal[2], local engine: {seconds['local']:.0f} s; cluster, spark engine: {seconds['cluster']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    names = sorted(path.stem for path in args.queries.glob("*.yaml"))
    with StandaloneCluster(args.work / "cluster-processes", workers=2) as cluster:
        seconds = run_demos(args.queries.resolve(), args.work, cluster)
    rows = [compare(args.work, name) for name in names]
    print_table(rows, seconds)
    differ = [row["query"] for row in rows if not row["same"] or row["engine"] != "spark"]
    named = f"; differ: {', '.join(differ)}" if differ else ""
    print(f"\n{len(rows) - len(differ)} of {len(rows)} queries the same{named}")
    return 1 if differ else 0


def _parser() -> argparse.ArgumentParser:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.every_query", description=summary)
    parser.add_argument("--queries", type=Path, default=ROOT / "conf" / "queries", help="a folder of query specs")
    parser.add_argument(
        "--work", type=Path, default=ROOT / "state" / "cluster-queries", help="where both demos write (emptied first)"
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
