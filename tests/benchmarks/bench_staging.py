"""Staging's cost per changelog row: parsing a Debezium file, checking the changelog protocol,
writing the staged segments, at millions of rows (staging runs before the stream's first
micro-batch, so it is start-up the user waits through).

The protocol check is measured twice over the same parsed rows, side by side: the columnar check
staging uses (jobs/changelog/live.py) and the row-by-row definition it must agree with
(live_rowwise.py), which is also what a file with a bad row is replayed through. Both must end
with the same live rows; the benchmark fails if they do not. The whole `stage_source` runs in a
process of its own, measured as the race measures an engine: its seconds, and its peak resident
memory sampled from outside (imports included).

Input: the race's orders changelog (tests/benchmarks/race.py: one Debezium file, a tenth as many
keys as events), generated once into state/race/ and shared with `make race`.

    python -m tests.benchmarks.bench_staging [--events 1200000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from jobs.changelog.formats import parse_file
from jobs.changelog.live import LiveRows
from jobs.changelog.live_rowwise import RowByRow
from jobs.changelog.schema import parse_schema
from jobs.changelog.staging import stage_source
from jobs.spec.model import SourceSpec, StreamSpec
from tests.benchmarks.race import CLASSES, SOURCES, WORK, measure, write_inputs

KEY = ("order_id",)


def main() -> None:
    arguments = _arguments()
    if arguments.stage_only:
        print(json.dumps({"seconds": _stage_whole_source(arguments.stage_only)}))
        return
    events = arguments.events
    folder = WORK / f"group_aggregate-{events}"
    rows = write_inputs(folder, CLASSES["group_aggregate"], events)
    path = folder / "orders" / "part-00000.json"
    print(f"staging {path} ({rows:,} changelog rows, {path.stat().st_size / 2**20:,.0f} MiB)")
    schema = parse_schema(SOURCES["orders"].schema, where="bench")
    parsed, parse_s = _timed(lambda: parse_file(path, "debezium-json", schema))
    columnar, columnar_s = _timed(lambda: _checked(LiveRows(schema, KEY), parsed.rows))
    row_by_row, row_by_row_s = _timed(lambda: _checked(RowByRow(schema, KEY), parsed.rows))
    if sorted(columnar._table.to_pylist(), key=repr) != sorted(row_by_row.table().to_pylist(), key=repr):
        raise SystemExit("the columnar check and the row-by-row check disagree on the live rows")
    staged_s, staged_mib = _staged_in_a_process(folder)
    print(f"{'step':<34}{'seconds':>9}{'rows/s':>14}")
    for step, seconds in [
        ("parse (Arrow JSON, Debezium)", parse_s),
        ("protocol check, columnar", columnar_s),
        ("protocol check, row by row", row_by_row_s),
        ("stage_source: all of it, written", staged_s),
    ]:
        print(f"{step:<34}{seconds:>9.2f}{rows / seconds:>14,.0f}")
    print(
        f"live keys after the file: {len(columnar):,}; columnar check {row_by_row_s / columnar_s:.0f}x "
        f"faster than row by row"
    )
    print(f"stage_source's process: peak resident memory {staged_mib:,} MiB (imports included)")


def _checked(live, rows):
    if live.check(rows):
        raise SystemExit("the race's changelog breaks the protocol")
    return live


def _staged_in_a_process(folder: Path) -> tuple[float, int]:
    command = [sys.executable, "-m", "tests.benchmarks.bench_staging", "--stage-only", str(folder / "orders")]
    run = measure(command, folder / "bench_staging", dict(os.environ))
    if run["exit"] != 0:
        raise SystemExit(f"staging failed: {run['error']}")
    reported = json.loads((folder / "bench_staging.out").read_text().splitlines()[-1])
    return reported["seconds"], run["peak_mib"]


def _stage_whole_source(folder: Path) -> float:
    spec = SourceSpec(path=folder, format="debezium-json", schema=SOURCES["orders"].schema, primary_key=list(KEY))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        _, commit = stage_source(
            "orders", spec, Path(out) / "orders", Path(out) / "quarantine", batch_size=StreamSpec()
        )
        commit()
        return time.perf_counter() - start


def _timed(step):
    start = time.perf_counter()
    result = step()
    return result, time.perf_counter() - start


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events",
        type=int,
        default=1_200_000,
        help="logical events in the orders changelog (default 1,200,000: 1.5 M rows)",
    )
    parser.add_argument("--stage-only", type=Path, metavar="FOLDER", help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    main()
