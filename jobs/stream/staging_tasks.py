"""Staging as Spark tasks, for the spark engine: the sources' rows never reach the driver.

Each folder source is staged by one task on an executor (parsed, checked against the changelog
rules, numbered and cut into segments: jobs/changelog/staging.py, the code the local engine runs
in the driver), and the tasks of different sources run side by side. A source's rows are ordered
(`__seq` numbers them in file order), so one source is one task. A task returns the source's
counts, never its rows; its bad rows wait in its prepared run. Once every source is staged, a
second round of tasks commits them, so a bad row in one source still leaves every source as it was.

A task reaches the sources and the run folder by their paths: the executors must see them as the
driver does (one host, or a shared file system). A Delta source is read through Spark and is
staged by the driver (staging.py).

A LockstepError in a task (a bad row in fail mode, a changed file) comes back as the task's
value, not as a failed task: Spark would retry it, and the driver raises it with its own place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.changelog.staging import StageResult, commit_staged, stage_source
from jobs.errors import LockstepError
from jobs.spec.model import SourceSpec, StreamSpec


@dataclass(frozen=True)
class StagingJob:
    """One source's staging, as a task carries it (everything in it pickles)."""

    table: str
    source: SourceSpec
    directory: Path
    quarantine: Path
    anomalies: Path | None
    batch_size: StreamSpec
    until: date | None
    kafka_timeout: float = 10  # seconds a Kafka source's broker may take to answer

    def stage(self, spark: SparkSession | None = None) -> StageResult:
        """Stage and prepare the source (commit() makes it current); `spark` reads a Delta source."""
        result, _ = stage_source(
            self.table,
            self.source,
            self.directory,
            self.quarantine,
            batch_size=self.batch_size,
            anomalies=self.anomalies,
            until=self.until,
            spark=spark,
            kafka_timeout=self.kafka_timeout,
        )
        return result

    def commit(self) -> None:
        commit_staged(self.directory, self.quarantine, self.anomalies)


def stage_as_tasks(spark: SparkSession | None, jobs: list[StagingJob]) -> list[StageResult]:
    """Stage every job, one task each; raise the first job's error, if any failed."""
    return _run_tasks(spark, jobs, _stage_task, "lockstep: staging sources")


def commit_as_tasks(spark: SparkSession | None, jobs: list[StagingJob]) -> None:
    _run_tasks(spark, jobs, _commit_task, "lockstep: committing staged sources")


def _run_tasks(spark: SparkSession | None, jobs: list[StagingJob], task, description: str) -> list:
    if not jobs:
        return []
    assert spark is not None, "staging as tasks needs the session"
    context = spark.sparkContext
    context.setJobDescription(description)
    try:
        outcomes = context.parallelize(jobs, len(jobs)).map(task).collect()
    finally:
        context.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
    for outcome in outcomes:
        if isinstance(outcome, LockstepError):
            raise outcome
    return outcomes


def _stage_task(job: StagingJob) -> StageResult | LockstepError:
    try:
        return job.stage().counted()
    except LockstepError as error:
        return error


def _commit_task(job: StagingJob) -> None | LockstepError:
    try:
        job.commit()
    except LockstepError as error:
        return error
    return None
