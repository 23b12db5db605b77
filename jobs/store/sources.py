"""Sources on an object store: a changelog folder or a Delta table at s3a://bucket/prefix.

A Delta table is read where it is, by delta-rs and by Spark through S3A (tables.py): only the
versions staged are read. A changelog folder's objects are copied before the stream step stages
them into a local cache beside the run folders' working copies
(<store.work_dir>/sources/<bucket>/<prefix>), each object only when it is new or its ETag changed,
so the folder is read as a local one is. A file that changed on the store arrives changed, and
staging treats it as it treats a local changed file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jobs.runtime.progress import Progress
from jobs.spec.model import QuerySpec, Settings
from jobs.store.access import store_access
from jobs.store.client import ObjectStore
from jobs.store.tables import reach
from jobs.store.url import StoreUrl


@dataclass(frozen=True)
class SourceCopy:
    name: str
    url: StoreUrl
    local: Path

    @property
    def index(self) -> Path:
        """Each copied object's ETag, beside the copy."""
        return self.local.with_name(f".{self.local.name}.etags.json")


def with_local_sources(spec: QuerySpec, settings: Settings) -> tuple[QuerySpec, tuple[SourceCopy, ...]]:
    """The spec with each changelog folder on a store turned into its local copy's path, and the
    copies to make before staging."""
    copies = []
    sources = dict(spec.sources)
    for name, source in spec.sources.items():
        if isinstance(source.path, str) and source.format != "delta":
            url = StoreUrl.parse(source.path)
            local = Path(settings.store.work_dir).expanduser() / "sources" / url.bucket / (url.prefix or "_root")
            copies.append(SourceCopy(name, url, local))
            sources[name] = source.model_copy(update={"path": local})
    return (spec.model_copy(update={"sources": sources}) if copies else spec), tuple(copies)


def reach_delta_sources(spec: QuerySpec, settings: Settings) -> tuple[StoreUrl, ...]:
    """The Delta sources on a store, each bucket's access registered for their readers."""
    urls = tuple(
        StoreUrl.parse(s.path) for s in spec.sources.values() if isinstance(s.path, str) and s.format == "delta"
    )
    for url in urls:
        reach(str(url), store_access(settings.store, str(url)))
    return urls


def check_source_buckets(urls: list[StoreUrl], settings: Settings) -> None:
    for bucket in sorted({url.bucket for url in urls}):
        store = ObjectStore(store_access(settings.store, f"s3a://{bucket}"))
        try:
            store.check_bucket(bucket)
        finally:
            store.close()


def copy_sources(copies: tuple[SourceCopy, ...], settings: Settings, progress: Progress) -> None:
    if not copies:
        return
    store = ObjectStore(store_access(settings.store, str(copies[0].url)))
    try:
        for copy in copies:
            fetched, size, removed = _copy(store, copy)
            progress.say(
                f"source {copy.name}: {fetched} new or changed file(s) ({size / 2**20:.1f} MiB) copied from "
                f"{copy.url}" + (f", {removed} gone from the store removed" if removed else "")
            )
    finally:
        store.close()


def _copy(store: ObjectStore, copy: SourceCopy) -> tuple[int, int, int]:
    prefix = copy.url.key() + "/" if copy.url.prefix else ""
    known = _read_index(copy.index)
    listed = {o.key[len(prefix) :]: o for o in store.list(copy.url.bucket, prefix) if not o.key.endswith("/")}
    fetched = size = 0
    for rel, item in sorted(listed.items()):
        path = copy.local / rel
        if known.get(rel) == item.etag and path.exists():
            continue
        store.get_file(copy.url.bucket, item.key, path)
        fetched, size = fetched + 1, size + item.size
    removed = 0
    for rel in set(known) - set(listed):
        (copy.local / rel).unlink(missing_ok=True)
        removed += 1
    copy.local.mkdir(parents=True, exist_ok=True)
    partial = copy.index.with_name(copy.index.name + ".partial")
    partial.write_text(json.dumps({rel: item.etag for rel, item in listed.items()}))
    os.replace(partial, copy.index)
    return fetched, size, removed


def _read_index(path: Path) -> dict[str, str]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
