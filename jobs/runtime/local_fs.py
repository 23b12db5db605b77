"""lockstep's Hadoop local file system for Spark: Hadoop's own, with permissions set without a
child process.

Without Hadoop's native library (pyspark ships none), Hadoop's local file system runs `chmod` as a
child process for every file it creates: six forks of the driver's JVM per streaming micro-batch
(the offset, commit and source-log entries, each with its `.crc`), 11-23 ms of every
micro-batch on two cores (tests/benchmarks/bench_microbatch.py).
LocalFileSystemWithoutForks (jobs/runtime/jvm) sets them through java.nio instead; setup builds it
into the venv's jars/ folder (scripts/jvm-jars.sh).

It must be on the JVM's class path from the start, not in spark.jars: spark-submit opens the
local file system before it loads spark.jars. Without the jar Spark runs with Hadoop's class, as
before; `spark.hadoop.fs.file.impl` in the settings' extra overrides the choice either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

JAR = Path(sys.prefix) / "jars" / "lockstep-local-fs.jar"
FILE_SYSTEM = "lockstep.runtime.LocalFileSystemWithoutForks"
IMPL = "spark.hadoop.fs.file.impl"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
EXECUTOR_CLASS_PATH = "spark.executor.extraClassPath"


def local_fs_conf(extra: dict[str, str], on_cluster: bool, jar: Path = JAR) -> dict[str, str]:
    """The Spark settings that make `file:` paths use lockstep's class: the jar on the driver's
    class path (and the executors', on a cluster, whose workers see this machine's paths, as
    PYSPARK_PYTHON already requires), joined to any class path the settings' extra gives. None
    when the extra names a file system class of its own, or setup built no jar."""
    if not jar.is_file() or IMPL in extra:
        return {}
    conf = {IMPL: FILE_SYSTEM, DRIVER_CLASS_PATH: _joined(jar, extra.get(DRIVER_CLASS_PATH))}
    if on_cluster:
        conf[EXECUTOR_CLASS_PATH] = _joined(jar, extra.get(EXECUTOR_CLASS_PATH))
    return conf


def _joined(jar: Path, theirs: str | None) -> str:
    return os.pathsep.join(p for p in (str(jar), theirs) if p)
