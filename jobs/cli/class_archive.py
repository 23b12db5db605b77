"""`python -m jobs.cli.class_archive` (run by `make setup`): write the driver JVM's class archive
(see jobs/runtime/jvm_classes.py) from a small run of the bundled income_per_product query, streamed,
batched and checked with each sink writer, so that the archive holds what a run loads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pyspark import SparkContext

from jobs.pipeline import Pipeline
from jobs.runtime.jvm_classes import ARCHIVE, DUMP_TO
from jobs.runtime.spark import stop_session

TRAINING_QUERY = Path(__file__).resolve().parents[2] / "conf" / "queries" / "income_per_product.yaml"


def write_archive(archive: Path = ARCHIVE) -> bool:
    """Run the training workload in a child process (the JVM writes the archive when it exits)
    and move the archive into place only when it is complete."""
    partial = archive.with_name(archive.name + ".part")
    partial.unlink(missing_ok=True)
    env = {**os.environ, DUMP_TO: str(partial)}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli.class_archive", "--workload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"setup: no JVM class archive (Spark starts without it, a few seconds slower): {last}", file=sys.stderr)
        return False
    partial.replace(archive)
    return True


def _workload() -> None:
    """What a run loads: the bundled query streamed, batched and checked with each writer."""
    with tempfile.TemporaryDirectory(prefix="lockstep-jvm-classes-") as folder:
        queries = Path(folder) / "queries"
        shutil.copytree(TRAINING_QUERY.parent, queries, ignore=shutil.ignore_patterns("generated"))
        for writer in ("delta-rs", "delta-spark"):
            Pipeline.open(queries / TRAINING_QUERY.name, runs_dir=Path(folder) / writer, writer=writer).run()
    # The JVM writes the archive on a normal exit, which it takes when its stdin closes; this
    # process's exit would kill it first (the parent-death signal, see spark.py).
    gateway = SparkContext._gateway
    assert gateway is not None, "the runs above started Spark"
    jvm = gateway.proc
    stop_session()
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    if "--workload" in sys.argv[1:]:
        _workload()
    elif write_archive():
        print(f"setup: JVM class archive written to {ARCHIVE}", file=sys.stderr)
