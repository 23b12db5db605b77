"""One SeaweedFS S3 server for the store tests (tests/support/s3_server.py); a bucket per test."""

from __future__ import annotations

import itertools

import pytest

from jobs.cli.local_store import ACCESS_KEY, SECRET_KEY, LocalS3Server
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore

_PREFIXES = itertools.count()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    with LocalS3Server(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture(scope="session")
def shared_bucket(s3_server) -> str:
    return s3_server.create_bucket("lockstep-tests")


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
