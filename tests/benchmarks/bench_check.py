"""What a check costs as its run folder's history grows: one query, streamed once, then checked
again and again in one process (one SparkSession). Every check stores its validation results,
and Great Expectations' Data Docs would render all of them on each check; lockstep renders the
check's own pages and the index.

Prints, per check: its seconds, of them the Data Docs build (as the check's progress lines time
it), and the number of validation results the run folder holds.

    python -m tests.benchmarks.bench_check [--checks 20]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import time

from jobs.pipeline import Pipeline
from jobs.runtime.progress import Progress
from jobs.runtime.spark import spark_session
from tests.benchmarks.race import WORK
from tests.conftest import orders_spec, write_changelog

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"


class DocsClock(Progress):
    """The check's own progress (quiet), timing its "building Data Docs" wait."""

    def __init__(self):
        super().__init__(quiet=True)
        self.docs_seconds = 0.0

    @contextlib.contextmanager
    def waiting(self, message: str):
        started = time.monotonic()
        with super().waiting(message):
            yield
        if "Data Docs" in message:
            self.docs_seconds += time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20)
    args = parser.parse_args()
    folder = WORK / "check"
    shutil.rmtree(folder, ignore_errors=True)
    changes = [{"op": "+I", "order_id": i, "pId": i % 50, "income": i} for i in range(500)]
    write_changelog(folder / "orders", "001.json", changes)
    spec = orders_spec(folder, SQL, rows_per_batch=len(changes), name="bench_check")
    spark_session()
    clock = DocsClock()
    pipeline = Pipeline.open(spec, runs_dir=folder / "runs", progress=clock)
    pipeline.stream()
    pipeline.batch()
    seconds = []
    for number in range(1, args.checks + 1):
        clock.docs_seconds, started = 0.0, time.monotonic()
        pipeline.check()
        seconds.append(time.monotonic() - started)
        results = len(list((pipeline.layout.root / "gx" / "uncommitted" / "validations").rglob("*.json")))
        print(
            f"check {number:3d}: {seconds[-1]:5.2f} s, Data Docs {clock.docs_seconds:5.2f} s, "
            f"{results} validation results stored",
            flush=True,
        )
    tenth = max(len(seconds) // 10, 1)
    print(
        f"mean check seconds, first / last tenth: {statistics.mean(seconds[:tenth]):.2f} / "
        f"{statistics.mean(seconds[-tenth:]):.2f}"
    )


if __name__ == "__main__":
    main()
