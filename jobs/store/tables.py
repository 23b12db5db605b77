"""Delta tables on an object store, read where they are: delta-rs with the store's storage
options, Spark through Hadoop's S3A file system (jobs/runtime/s3a.py).

A step learns the stores it reaches from the settings (jobs/store/access.py), never from the
spec: the pipeline registers each bucket's access before the step runs (`reach`), and the
readers of a Delta source ask here for the table (`open_table`) or for the session set up to
read it (`readable_by`).
"""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from jobs.runtime.delta import is_delta_table, open_delta
from jobs.runtime.s3a import set_hadoop_conf
from jobs.spec.locations import is_store_url
from jobs.store.access import StoreAccess
from jobs.store.url import StoreUrl

_ACCESS: dict[str, StoreAccess] = {}  # bucket: how this process reaches it
_SET: dict[tuple[int, str], StoreAccess] = {}  # (session, bucket): what its Hadoop configuration holds


def reach(url: str, access: StoreAccess) -> None:
    _ACCESS[StoreUrl.parse(url).bucket] = access


def open_table(location: Path | str, version: int | None = None) -> DeltaTable:
    """The Delta table at a local path or an s3a:// URL."""
    return open_delta(location, version, _storage_options(location))


def is_table(location: Path | str) -> bool:
    return is_delta_table(location, _storage_options(location))


def readable_by(spark, location: Path | str, needed_for: str) -> str:
    """`location` as Spark reads it, the session's Hadoop configuration first set to reach its
    bucket. A bucket whose access changed (another store under the same name) has its cached
    file system closed, so the next read opens one with the new settings."""
    if not is_store_url(location):
        return str(location)
    bucket, access = StoreUrl.parse(str(location)).bucket, _access(str(location))
    held = (id(spark), bucket)
    if _SET.get(held) != access:
        set_hadoop_conf(spark, access.hadoop_conf(bucket), needed_for)
        if held in _SET:
            _close_cached_file_system(spark, bucket)
        _SET[held] = access
    return str(location)


def _storage_options(location) -> dict[str, str] | None:
    """delta-rs's storage options for a store URL (a StorePath carries its own); none for a
    local path."""
    if hasattr(location, "storage_options"):
        return location.storage_options
    return _access(str(location)).delta_rs_options() if is_store_url(location) else None


def _access(url: str) -> StoreAccess:
    bucket = StoreUrl.parse(url).bucket
    if bucket not in _ACCESS:
        raise AssertionError(f"no access registered for the bucket of {url}: the pipeline reaches its stores first")
    return _ACCESS[bucket]


def _close_cached_file_system(spark, bucket: str) -> None:
    jvm = spark.sparkContext._jvm
    uri = jvm.java.net.URI(f"s3a://{bucket}/")
    jvm.org.apache.hadoop.fs.FileSystem.get(uri, spark.sparkContext._jsc.hadoopConfiguration()).close()
