"""Which of its compilers the driver JVM runs, chosen by the size of the run's input.

A JVM compiles hot code twice by default: first quickly (C1), then, for code that stays hot,
again with a profile, slowly and well (C2). On 2 cores the second compiler's work competes with
Spark's for the first seconds of every run, and most of a small run is those first seconds: its
plans are new (Spark generates Java for each), so little code gets hot enough to pay back C2.
With C1 alone (`-XX:TieredStopAtLevel=1`) a short run finishes sooner and a long one later: on 2
cores, alternated against the default, a small query's `lockstep run` took about a fifth less
time, the race's 1.5 M-row file a little less; its 6 M-row file (650 MiB) 21.9-23.4 s against
23.8-25.1 s, the JVM's compiler threads' CPU 12 s to 2 s; a 15 M-row file (1.6 GiB) the same,
59.2 and 56.6 s against 57.3 and 56.4 s, its check's new plans slower and its stream faster.
Once warm, the micro-batches' JVM work is a fifth slower.

So a step that streams (the CLI's steps, whose JVM starts as soon as the spec has planned, and
an Airflow stream task) asks for C1 alone when its sources' files total less than
`spark.quick_jit_below_mib` (default 1024 MiB); a session started without that knowledge (a batch
or check task alone, the test suite's one session) keeps the JVM's default.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from jobs.spec.model import QuerySpec

QUICK_ONLY = "-XX:TieredStopAtLevel=1"


def jit_options(input_bytes: int | None, quick_below_mib: int) -> str:
    """C1 alone when the run's input is known and under `quick_below_mib` MiB (0: never)."""
    if input_bytes is None or quick_below_mib <= 0 or input_bytes >= quick_below_mib * 2**20:
        return ""
    return QUICK_ONLY


def input_bytes(spec: QuerySpec) -> int:
    """The bytes of a query spec's sources' files, all of them (new or not, any date): what the
    JVM's choice is made on, before the run has read anything."""
    return files_bytes(s.path for s in spec.sources.values() if isinstance(s.path, Path))


def files_bytes(paths: Iterable[Path]) -> int:
    """The bytes of every file at or under `paths` (a path that does not exist counts nothing)."""
    total = 0
    for path in paths:
        path = Path(path)
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return total
