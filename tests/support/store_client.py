"""A client of a test's S3 server (tests/conftest.py's s3_server), for putting and reading
objects around a lockstep run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jobs.cli.local_store import LocalS3Server
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore


@contextmanager
def store_client(server: LocalS3Server) -> Iterator[ObjectStore]:
    """A client of `server`, whichever ports it has now."""
    env = server.environment()
    store = ObjectStore(
        StoreAccess(server.endpoint, env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    )
    try:
        yield store
    finally:
        store.close()
