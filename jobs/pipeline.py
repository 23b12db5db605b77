"""The one way to run lockstep's steps on a query. The command line, the demo, rebuild and the
Airflow operators all open a Pipeline and call its steps:

    pipeline = Pipeline.open("conf/queries/income_per_product.yaml")
    pipeline.stream()   # stage new changelog files, stream them into the sink, record the point
    pipeline.batch()    # the user's SQL on exactly what the stream consumed
    pipeline.check()    # the Great Expectations suites, report.json and report.html
    pipeline.run()      # the three in one process (one SparkSession)
    pipeline.rebuild()  # every partition into a fresh sink, date by date

Each step takes an optional logical date (a scheduled run's): the stream reads the partitions up
to it, batch and check work at its consistency point.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.batch.job import BatchResult, run_batch
from jobs.errors import RunStateError, StoreError, one_line
from jobs.kafka.servers import with_bootstrap_servers
from jobs.plan import Plan, plan_query
from jobs.point import batch_is_at, read_point
from jobs.rebuild import rebuild
from jobs.runtime.imports import import_in_background, wait_for_background_imports
from jobs.runtime.layout import RunLayout
from jobs.runtime.lock import RunLock, run_lock
from jobs.runtime.phases import Phases
from jobs.runtime.progress import Progress
from jobs.spec import load_settings, load_spec, with_master, with_overrides
from jobs.spec.locations import location
from jobs.spec.model import Settings
from jobs.store.run_folder import StoreRunFolder, store_run_folder
from jobs.store.sources import SourceCopy, check_source_buckets, copy_sources, reach_delta_sources, with_local_sources
from jobs.store.url import StoreUrl
from jobs.stream.job import StreamResult, run_stream, stream_until

if TYPE_CHECKING:
    from expectations.report.model import Report


@dataclass(frozen=True)
class Pipeline:
    plan: Plan
    settings: Settings
    layout: RunLayout
    progress: Progress
    store_folder: StoreRunFolder | None = None  # an s3a:// run folder; layout.root is its working copy
    source_copies: tuple[SourceCopy, ...] = ()  # changelog folders on an object store, copied before staging
    store_tables: tuple[StoreUrl, ...] = ()  # Delta sources on an object store, read where they are

    @classmethod
    def open(
        cls,
        spec_path: str | Path,
        *,
        settings_path: str | Path | None = None,
        runs_dir: str | Path | None = None,
        progress: Progress | None = None,
        writer: str | None = None,
        master: str | None = None,
        engine: str | None = None,
    ) -> Pipeline:
        """Load and plan the spec; its run folder is <runs_dir>/<query name> (runs_dir: the
        settings' when not given). writer, engine and master override the spec's sink writer and
        stream engine and the settings' Spark master."""
        settings = with_master(load_settings(settings_path), master)
        spec = with_overrides(load_spec(spec_path), writer=writer, engine=engine, on_cluster=settings.spark.on_cluster)
        return cls.of(plan_query(spec), settings, runs_dir, progress)

    @classmethod
    def of(
        cls, plan: Plan, settings: Settings, runs_dir: str | Path | None = None, progress: Progress | None = None
    ) -> Pipeline:
        spec, copies = with_local_sources(with_bootstrap_servers(plan.spec, settings.kafka), settings)
        tables = reach_delta_sources(spec, settings)
        plan = replace(plan, spec=spec)
        progress = progress or Progress(quiet=True)
        runs = location(runs_dir or settings.runs_dir)
        if settings.spark.on_cluster and copies and not isinstance(runs, str):
            raise StoreError(
                f"a changelog folder on an object store is copied to this host, which a cluster's executors "
                f"({settings.spark.master}) cannot see when they stage it into a local run folder: put the run folder "
                f"on the store too, or use a local[N] master (docs/object-storage.md)",
                where=str(copies[0].url),
            )
        if isinstance(runs, str):
            folder = store_run_folder(runs, plan.spec.name, settings)
            layout = RunLayout(folder.root)
            if settings.spark.on_cluster:
                layout, settings = folder.shared_with_spark(layout, settings, plan.spec.sink.writer)
            return cls(plan, settings, layout, progress, folder, copies, tables)
        return cls(plan, settings, RunLayout.for_query(runs, plan.spec.name), progress, None, copies, tables)

    @property
    def store_url(self) -> str | None:
        """The run folder's s3a:// URL when it is on an object store."""
        return str(self.store_folder.run) if self.store_folder is not None else None

    def check_store(self) -> None:
        """The object stores this pipeline uses (its run folder's, its sources'): endpoint,
        credentials and bucket, one request each, before anything else starts."""
        if self.store_folder is not None:
            self.store_folder.check()
        check_source_buckets([c.url for c in self.source_copies] + list(self.store_tables), self.settings)

    @property
    def lock(self) -> RunLock | StoreRunFolder:
        """Held by every step: one writer per run folder. On an object store it also restores
        the working copy first and commits it after (jobs/store/run_folder.py)."""
        return self.store_folder or run_lock(self.layout.root)

    def stream(self, logical_date: date | None = None) -> StreamResult | None:
        """Stream everything new, or, for a logical date, up to it; None when the stream is
        already past that date (the date is then re-checked at its recorded point)."""
        with self.lock:
            copy_sources(self.source_copies, self.settings, self.progress)
            # On an object store each micro-batch is committed as it finishes.
            commit = self.store_folder.commit_progress if self.store_folder is not None else None
            if logical_date is None:
                return run_stream(self.plan, self.settings, self.layout, self.progress, after_micro_batch=commit)
            return stream_until(self.plan, self.settings, self.layout, self.progress, logical_date, commit)

    def batch(self, logical_date: date | None = None) -> BatchResult:
        with self.lock:
            return run_batch(self.plan, self.settings, self.layout, self.progress, logical_date)

    def check(self, logical_date: date | None = None) -> Report:
        """Check the latest consistency point, or a logical date's. The batch result is
        recomputed first when another date's batch step has overwritten it since."""
        with self.lock, self._errors_reported(logical_date):
            return self._check(logical_date)

    def run(self, logical_date: date | None = None) -> Report:
        """Stream, batch and check in one process (one SparkSession)."""
        with self.lock, self._errors_reported(logical_date):
            started = time.monotonic()
            self.stream(logical_date)
            streamed = time.monotonic()
            import_in_background("expectations.check")  # while the batch job waits on Spark
            self.batch(logical_date)
            steps = {"stream": round(streamed - started, 2), "batch": round(time.monotonic() - streamed, 2)}
            return self._check(logical_date, steps)

    def rebuild(self, until: date | None = None) -> list[Report]:
        """Replay every partition (up to `until`) into a fresh run folder, checking each date."""
        if self.store_folder is not None:
            raise RunStateError(
                "rebuild replaces the run folder, which an object store's commits do not do yet: rebuild "
                "into a local --out folder",
                where=str(self.store_folder.run),
            )
        with self.lock:
            copy_sources(self.source_copies, self.settings, self.progress)  # rebuild lists the dates
            return rebuild(self.plan, self.layout, self.progress, self.run, until)

    def _check(self, logical_date: date | None, steps: dict[str, float] | None = None) -> Report:
        if not self.layout.batch.exists():
            raise RunStateError("no batch result: run `lockstep batch` first", where=str(self.layout.root))
        if not batch_is_at(self.layout, read_point(self.layout, logical_date)):
            self.progress.say(
                f"check {self.plan.spec.name}: the batch result is at another consistency "
                f"point (a run for another date wrote it); recomputing it at this one"
            )
            self.batch(logical_date)
        # Imported here: Great Expectations takes seconds to import, and `lockstep stream` or
        # `batch` never needs it. After `run`'s import in the background, this waits for it.
        phases = Phases()
        with self.progress.waiting("loading Great Expectations ..."), phases.timed("loading Great Expectations"):
            wait_for_background_imports()
            from expectations.check import run_check
        return run_check(self.plan, self.settings, self.layout, self.progress, logical_date, steps, phases)

    @contextmanager
    def _errors_reported(self, logical_date: date | None):
        """A run or check that ends before a verdict leaves an error report (the index lists the
        query as ERROR with its reason), then the error goes on to the caller."""
        try:
            yield
        except Exception as exc:
            wait_for_background_imports()  # run's import of the check may still be loading the package
            from expectations.report.publish import publish_error  # not on a stream's path: see _check

            publish_error(
                self.plan.spec.name,
                self.plan.spec.description,
                self.layout.root,
                one_line(exc),
                logical_date.isoformat() if logical_date else None,
            )
            raise
