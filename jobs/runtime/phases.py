"""Where a step's time goes: the wall seconds of its named phases and the Spark jobs each ran.

A phase's Spark jobs are counted by a job group of its own (SparkContext.setJobGroup), so a
phase that runs one job per expectation shows it. The figures go to the report (`check_phases`,
`step_seconds`), to `lockstep run`'s summary and to `make race`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_groups = count()  # job groups unique within the process


class Phases:
    """Named phases in the order they first ran: {name: {"seconds", "spark_jobs"}}; a phase
    timed twice adds up."""

    def __init__(self, spark: SparkSession | None = None):
        self.spark = spark
        self.figures: dict[str, dict[str, float]] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        group = f"lockstep-phase-{next(_groups)}"
        context = self.spark.sparkContext if self.spark is not None else None
        if context is not None:
            context.setJobGroup(group, name)
        started = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            jobs = len(context.statusTracker().getJobIdsForGroup(group)) if context is not None else 0
            if context is not None:  # jobs after the phase belong to no phase
                for key in ("spark.jobGroup.id", "spark.job.description"):
                    context.setLocalProperty(key, None)  # type: ignore[arg-type]  # None clears it
            entry = self.figures.setdefault(name, {"seconds": 0.0, "spark_jobs": 0})
            entry["seconds"] = round(entry["seconds"] + seconds, 2)
            entry["spark_jobs"] += jobs

    def seconds(self) -> float:
        return sum(entry["seconds"] for entry in self.figures.values())

    def to_json(self) -> dict[str, dict[str, float]]:
        return {name: dict(entry) for name, entry in self.figures.items()}


def phase_line(phases: dict[str, dict[str, float]], most: int = 5) -> str:
    """`suite unity 3.1 s (12 Spark jobs), ...`: the `most` slowest phases as one line."""
    ordered = sorted(phases.items(), key=lambda item: -item[1]["seconds"])
    shown = [f"{name} {f['seconds']:.1f} s ({int(f['spark_jobs'])} Spark jobs)" for name, f in ordered[:most]]
    rest = sum(f["seconds"] for _, f in ordered[most:])
    return ", ".join(shown + ([f"the rest {rest:.1f} s"] if len(ordered) > most else []))
