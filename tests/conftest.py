"""Shared fixtures: one SparkSession for the whole test run, and helpers to write query specs
and changelog files into temporary folders."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import settings as hypothesis_settings

ROOT = Path(__file__).resolve().parents[1]

# Hypothesis: `make test` draws the same examples every run (derandomized, no example database),
# so a failure in CI fails the same way on any machine; `make property` draws new ones from the
# seed it prints, more of them (LOCKSTEP_PROPERTY_SCALE). Either way a failure prints the
# falsifying example and the @reproduce_failure blob that replays it.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
hypothesis_settings.register_profile("property", derandomize=False, print_blob=True, deadline=None)
hypothesis_settings.load_profile(os.environ.get("LOCKSTEP_HYPOTHESIS_PROFILE", "ci"))


def pytest_report_header(config) -> str:
    profile = os.environ.get("LOCKSTEP_HYPOTHESIS_PROFILE", "ci")
    seed = config.getoption("hypothesis_seed", None)
    if profile == "ci":
        return "hypothesis: profile ci (derandomized: the same examples every run)"
    return f"hypothesis: profile {profile}, seed {seed}: `make property SEED={seed}` draws these examples again"


# Airflow reads its configuration when first imported: point it at a throwaway home first.
os.environ.setdefault("AIRFLOW_HOME", str(ROOT / "state" / "test-airflow"))
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")


@pytest.fixture(scope="session")
def spark():
    from jobs.runtime.spark import spark_session, stop_session
    from jobs.spec.model import SparkSettings

    session = spark_session(SparkSettings(shuffle_partitions=2, driver_memory="2g"))
    yield session
    stop_session()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """One Kafka broker on 127.0.0.1 for the session (each test its own topics), stopped whatever
    happens."""
    from jobs.cli.local_kafka import KafkaBroker

    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture
def java() -> str:
    """The Java Spark runs on. Missing, it is a setup to run, not a test to skip."""
    found = shutil.which("java")
    assert found, "no java on PATH: run `make setup`, which installs a Java 17 JDK"
    return found


@pytest.fixture
def settings():
    from jobs.spec.model import Settings

    return Settings()


def write_changelog(folder: Path, name: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_spec(folder: Path, text: str, name: str = "query.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def orders_spec(
    folder: Path,
    sql: str,
    *,
    rows_per_batch: int = 2,
    sink: dict | None = None,
    source: dict | None = None,
    stream: dict | None = None,
    name: str = "q",
    more_sources: dict | None = None,
) -> Path:
    """A spec over an `orders` changelog-json source read from folder/orders (and `more_sources`)."""
    spec = {
        "name": name,
        "sql": sql,
        "sources": {
            "orders": {
                "path": "orders",
                "format": "changelog-json",
                "schema": "order_id BIGINT, pId BIGINT, income BIGINT",
                "primary_key": ["order_id"],
                **(source or {}),
            },
            **(more_sources or {}),
        },
        "stream": {"rows_per_batch": rows_per_batch, **(stream or {})},
    }
    if sink is not None:
        spec["sink"] = sink
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def change(op: str, order_id: int, pid, income) -> dict:
    return {"order_id": order_id, "pId": pid, "income": income, "op": op}


LATE_ORDERS = [  # the third change's minute closed when the watermark passed 09:05:50
    {"op": "+I", "order_id": 1, "pId": 7, "amount": 30, "order_time": "2026-11-21T09:00:05"},
    {"op": "+I", "order_id": 2, "pId": 8, "amount": 20, "order_time": "2026-11-21T09:06:00"},
    {"op": "+I", "order_id": 3, "pId": 7, "amount": 40, "order_time": "2026-11-21T09:00:50"},
]


def late_event_spec(folder: Path, name: str = "late") -> Path:
    """A per-minute window whose stream leaves a late change out while the batch counts it: stream
    and batch disagree for real (a verdict of fail, exit 1), explained by the late event."""
    write_changelog(folder / f"{name}_orders", "001.json", LATE_ORDERS)
    spec = {
        "name": name,
        "sql": "SELECT pId, window.start AS minute, COUNT(*) AS orders, SUM(amount) AS revenue "
        "FROM orders GROUP BY pId, window(order_time, '1 minute')",
        "sources": {
            "orders": {
                "path": f"{name}_orders",
                "format": "changelog-json",
                "schema": "order_id BIGINT, pId BIGINT, amount BIGINT, order_time TIMESTAMP",
                "primary_key": ["order_id"],
                "event_time": "order_time",
                "watermark": "10 seconds",
            }
        },
        "stream": {"rows_per_batch": 1},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS S3 server on 127.0.0.1 for the session (the store and cluster tests),
    stopped whatever happens."""
    from jobs.cli.local_store import LocalS3Server

    with LocalS3Server(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture(scope="session")
def shared_bucket(s3_server) -> str:
    return s3_server.create_bucket("lockstep-tests")
