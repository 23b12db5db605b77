"""`lockstep demo --local-store` (make demo-s3): the demo with everything on an object store.

A local S3 server (jobs/cli/local_store.py) is started for the demo and stopped after it. Each
query's source folders are put in the bucket, the specs read them from there, and each query's
run folder (its sinks, reports and state) is on the store, cleared first as the plain demo clears
its local folder. The settings a person needs to try it by hand are printed at the end.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from jobs.cli.local_store import LocalS3Server
from jobs.runtime.progress import Progress
from jobs.spec.model import QuerySpec, Settings
from jobs.store.access import store_access
from jobs.store.client import ObjectStore
from jobs.store.url import StoreUrl

BUCKET = "lockstep-demo"
RUNS = f"s3a://{BUCKET}/runs"


def run_on_local_store(args, settings: Settings, specs: list[Path], progress: Progress, run_all: Callable) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="lockstep-local-store-"))
    try:
        with LocalS3Server(workdir / "server") as server:
            progress.say(f"local S3 server (SeaweedFS) on {server.endpoint}, bucket {BUCKET}")
            server.create_bucket(BUCKET)
            env = server.environment()
            store_settings = settings.store.model_copy(
                update={
                    "endpoint": server.endpoint,
                    "region": env["AWS_REGION"],
                    "access_key_id": env["AWS_ACCESS_KEY_ID"],
                    "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                    "work_dir": workdir / "work",
                }
            )
            settings = settings.model_copy(update={"store": store_settings})
            store = ObjectStore(store_access(store_settings, RUNS))
            try:
                on_store = _OnStore(store, args.queries.resolve(), progress)
                rows = run_all(args, settings, specs, RUNS, progress, on_store)
            finally:
                store.close()
            _print_settings(server, rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    verdicts = {r["verdict"] for r in rows}
    return 2 if "error" in verdicts else (1 if "fail" in verdicts else 0)


class _OnStore:
    """A spec with its sources in the bucket (each folder put there once) and its run folder on
    the store cleared."""

    def __init__(self, store: ObjectStore, queries: Path, progress: Progress):
        self.store, self.queries, self.progress = store, queries, progress
        self.uploaded: dict[Path, str] = {}

    def __call__(self, spec: QuerySpec) -> QuerySpec:
        sources = {name: s.model_copy(update={"path": self._url(s.folder)}) for name, s in spec.sources.items()}
        run = StoreUrl.parse(RUNS).child(spec.name)
        for listed in self.store.list(run.bucket, run.key() + "/"):
            self.store.delete(run.bucket, listed.key)
        return spec.model_copy(update={"sources": sources})

    def _url(self, folder: Path) -> str:
        if folder not in self.uploaded:
            relative = folder.relative_to(self.queries) if folder.is_relative_to(self.queries) else Path(folder.name)
            url = StoreUrl(BUCKET, f"sources/{relative.as_posix()}")
            files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
            for path in files:
                self.store.put_file(url.bucket, url.key(path.relative_to(folder).as_posix()), path)
            self.progress.say(f"put {len(files)} file(s) of {folder} in {url}")
            self.uploaded[folder] = str(url)
        return self.uploaded[folder]


def _print_settings(server: LocalS3Server, rows: list[dict]) -> None:
    env = server.environment()
    print(
        f"\nsources: s3a://{BUCKET}/sources/...; run folders, sinks and reports: {RUNS}/<query>/ "
        f"(report.html, stream/, batch/). The server stopped with the demo.\n"
        "To try it by hand: `.venv/bin/python -m jobs.cli.local_store` starts one and prints its "
        "settings, which were, for this demo's server:\n"
        + "".join(f"  export {name}={env[name]}\n" for name in sorted(env))
        + f"  lockstep run conf/queries/income_per_product.yaml --out {RUNS}"
    )
