"""Class-data sharing for the Spark driver's JVM: an archive of the classes a lockstep run loads
(Spark SQL and Structured Streaming, Delta's connector, the Python gateway), which the JVM maps at
start instead of loading, parsing and verifying each class from its jar.

Measured on 2 cores: a session with Delta's connector starts in 5-6 s instead of 9-10 s, and its
first jobs take 5-6 s instead of 9-10 s. The archive is a cache: `make setup` writes it once
(`python -m jobs.cli.class_archive`: the bundled income_per_product query run with both sink
writers under -XX:ArchiveClassesAtExit) and without it everything works as before. A JVM whose
version, class path or heap layout differs from the archive's ignores it (Java's default
-Xshare:auto) and starts the usual way; its CDS log lines are off, so nothing is printed either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ARCHIVE = Path(sys.prefix) / "spark-classes.jsa"
# Set in the training run's child process: the file the JVM writes its archive to at exit.
DUMP_TO = "LOCKSTEP_JVM_CLASSES_DUMP_TO"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_options(archive: Path = ARCHIVE) -> str:
    """The driver JVM's class-sharing options: write the archive (training run), use it (when
    setup made one), or nothing."""
    dump_to = os.environ.get(DUMP_TO)
    if dump_to:
        return f"-XX:ArchiveClassesAtExit={dump_to} {QUIET}"
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    return ""
