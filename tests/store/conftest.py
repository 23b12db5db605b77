"""The store tests' bucket, key prefix and client, on the session's SeaweedFS server (s3_server in
tests/conftest.py): a prefix per test in one shared bucket."""

from __future__ import annotations

import itertools

import pytest

from jobs.cli.local_store import ACCESS_KEY, SECRET_KEY
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore

_PREFIXES = itertools.count()


@pytest.fixture
def bucket(s3_server, shared_bucket, monkeypatch) -> str:
    """The tests' bucket, and the store's access in the environment as a user would set it."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return shared_bucket


@pytest.fixture
def prefix() -> str:
    """A key prefix of the test's own in the shared bucket."""
    return f"t{next(_PREFIXES)}"


@pytest.fixture
def store(s3_server):
    client = ObjectStore(StoreAccess(s3_server.endpoint, "us-east-1", ACCESS_KEY, SECRET_KEY))
    yield client
    client.close()
