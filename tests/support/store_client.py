"""A client of a test's S3 server (tests/conftest.py's s3_server), for putting and reading
objects around a lockstep run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jobs.cli.local_store import LocalS3Server
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore


def store_access(server: LocalS3Server) -> StoreAccess:
    """How to reach `server`, whichever ports it has now."""
    env = server.environment()
    return StoreAccess(server.endpoint, env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])


@contextmanager
def store_client(server: LocalS3Server) -> Iterator[ObjectStore]:
    """A client of `server`, whichever ports it has now."""
    store = ObjectStore(store_access(server))
    try:
        yield store
    finally:
        store.close()
