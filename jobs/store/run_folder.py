"""A run folder on an object store, as every step holds it (jobs/pipeline.py).

Entering: take the lease (a second writer is refused at once), restore the local working copy to
the newest commit. The step then reads and writes the working copy as it would a local run
folder. The stream step also commits after each micro-batch (commit_progress), so a step that
dies keeps the micro-batches it finished: the working copy is then in a state a kill -9 on local
disk could leave, which the next run recovers from in the same way. Leaving normally: commit the
working copy (mirror.py), release the lease. Leaving with an error: release the lease and commit
nothing more, so the store keeps the run folder as the last commit left it. Steps nest (run holds
it while calling stream, batch and check): only the outermost enters and leaves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from jobs.errors import StoreError
from jobs.runtime.layout import RunLayout
from jobs.runtime.s3a import checkpoints_on_a_store
from jobs.spec.model import Settings
from jobs.store.access import store_access
from jobs.store.client import ObjectStore
from jobs.store.lease import Lease
from jobs.store.mirror import Commit, Mirror
from jobs.store.paths import StorePath
from jobs.store.tables import reach
from jobs.store.url import StoreUrl

_HELD: dict[tuple[str, str], StoreRunFolder] = {}


@dataclass
class StoreCost:
    requests: int = 0  # HTTP requests to the store, the lease's renewals included
    bytes_put: int = 0
    restore_seconds: float = 0.0  # taking the lease and restoring the working copy
    commit_seconds: float = 0.0  # uploading, the commit record, publishing, pruning


def working_root(runs: StoreUrl, work_dir: Path, query: str) -> Path:
    """The local working copy of a query's run folder under an s3a:// runs folder."""
    return Path(work_dir).expanduser() / runs.bucket / runs.prefix / query


def store_run_folder(runs_url: str, query: str, settings) -> StoreRunFolder:
    """One object per run folder and store settings in a process, so that a step calling another
    (run calls stream) holds it once."""
    runs = StoreUrl.parse(runs_url)
    run = runs.child(query)
    held = (str(run), repr(settings.store))
    if held not in _HELD:
        _HELD[held] = StoreRunFolder(run, working_root(runs, settings.store.work_dir, query), settings)
    return _HELD[held]


class StoreRunFolder:
    def __init__(self, run: StoreUrl, root: Path, settings):
        self.run, self.root, self.settings = run, root, settings
        self._depth = 0
        self._store: ObjectStore | None = None
        self._lease: Lease | None = None
        self._restored: Commit | None = None
        self.last_commit: Commit | None = None
        self.cost = StoreCost()  # what the store cost the steps so far, for bench_store

    def __enter__(self) -> StoreRunFolder:
        if self._depth == 0:
            self._open()
        self._depth += 1
        return self

    def __exit__(self, kind, error, trace) -> None:
        self._depth -= 1
        if self._depth:
            return
        try:
            if kind is None:
                assert self._store is not None and self._lease is not None
                started = time.monotonic()
                self.last_commit = self._commit(prune=True) or self.last_commit
                self.cost.commit_seconds += time.monotonic() - started
        finally:
            self._close(quiet=kind is not None)

    def commit_progress(self) -> None:
        """Commit the working copy in the middle of the stream step, after each micro-batch, so
        that a step that dies keeps the micro-batches it finished; the step goes on after it."""
        if self._depth == 0:
            return
        started = time.monotonic()
        self._commit(prune=False)
        assert self._store is not None
        Mirror(self._store, self.run, self.root).begin(self._restored)  # changed again from here on
        self.cost.commit_seconds += time.monotonic() - started

    def _commit(self, *, prune: bool) -> Commit | None:
        assert self._store is not None and self._lease is not None
        commit = Mirror(self._store, self.run, self.root).commit(self._restored, self._lease.holds, prune=prune)
        if commit is not None:
            self._restored = self.last_commit = commit
        return commit

    def shared_with_spark(self, layout: RunLayout, settings: Settings, writer: str) -> tuple[RunLayout, Settings]:
        """For a cluster master: the layout whose Spark areas (checkpoint, Spark's Delta tables,
        the staged segments it reads) are the run folder's own keys on the store, reached by the
        executors through S3A; and the settings with the bucket's S3A configuration in Spark's.
        lockstep's own files stay in the working copy, committed as on a local master."""
        if writer == "delta-rs":
            raise StoreError(
                "the delta-rs writer writes the run folder's tables from this host, and stages their feeds "
                "where a cluster's executors cannot read them: use --writer delta-spark with a cluster master "
                "and a run folder on a store (docs/object-storage.md)",
                where=str(self.run),
            )
        access = store_access(self.settings.store, str(self.run))
        reach(str(self.run), access)  # delta-rs, in this process, reads those tables too
        hadoop = {f"spark.hadoop.{key}": value for key, value in access.hadoop_conf(self.run.bucket).items()}
        extra = {**checkpoints_on_a_store(), **hadoop, **settings.spark.extra}  # the settings' own win
        spark = settings.spark.model_copy(update={"extra": extra})
        shared = replace(layout, spark_root=StorePath(self.run, access), top=layout.root)
        return shared, settings.model_copy(update={"spark": spark})

    def check(self) -> None:
        """The endpoint, the credentials and the bucket, with one request."""
        store = ObjectStore(store_access(self.settings.store, str(self.run)))
        try:
            store.check_bucket(self.run.bucket)
        finally:
            store.close()

    def _open(self) -> None:
        access = store_access(self.settings.store, str(self.run))
        store = ObjectStore(access)
        try:
            store.check_bucket(self.run.bucket)
            lease = Lease(store, self.run, self.settings.store.lease_seconds)
            lease.acquire()
        except BaseException:
            store.close()
            raise
        self._store, self._lease = store, lease
        try:
            started = time.monotonic()
            mirror = Mirror(store, self.run, self.root)
            self._restored = mirror.restore()
            mirror.begin(self._restored)
            self.cost.restore_seconds += time.monotonic() - started
        except BaseException:
            self._close(quiet=True)
            raise

    def _close(self, *, quiet: bool = False) -> None:
        """Release the lease; with an error already on its way (quiet), a store that cannot be
        reached does not hide it: the lease then lapses by itself."""
        try:
            if self._lease is not None:
                self._lease.release()
        except StoreError:
            if not quiet:
                raise
        finally:
            if self._store is not None:
                self.cost.requests += self._store.requests
                self.cost.bytes_put += self._store.bytes_put
                self._store.close()
            self._store = self._lease = None
