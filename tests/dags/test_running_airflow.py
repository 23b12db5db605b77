"""A real Airflow: scripts/airflow.sh (`make airflow`) starts the API server, scheduler and DAG
processor on loopback; the test backfills two dates of a scheduled query through the REST API,
with the first stream attempt killed right after a sink commit, and waits for both runs.

Checks: the killed stream task was retried and resumed from its checkpoint (the sink equals an
uninterrupted run's), each date has a passing report at its consistency point, whose check task
links to its page served over HTTP by lockstep's plugin and recorded an event on the sink's
Asset; the provider and the plugin are discovered; and every process the test started is gone
afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.plan import plan_query
from jobs.runtime.delta import read_change_feed
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.handler import FAULT_AFTER_COMMIT
from jobs.stream.job import run_stream
from tests.conftest import ROOT
from tests.support.group_watchdog import watch

pytestmark = pytest.mark.slow
DAG_ID = "lockstep_daily_orders"
DATES = ["2026-11-19", "2026-11-20"]
# Fires on the backfilled dates only (see the airflow fixture).
BACKFILL_CRON = (
    f"0 0 {','.join(str(date.fromisoformat(day).day) for day in DATES)} {date.fromisoformat(DATES[0]).month} *"
)


class HttpError(Exception):
    pass


class Airflow:
    """The REST API of a running Airflow, as the admin user."""

    def __init__(self, base: str, home: Path):
        self.base, self.home, self.token = base, home, None

    def login(self) -> None:
        password = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        self.token = self.call("POST", "/auth/token", {"username": "admin", "password": password})["access_token"]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        return json.loads(self.fetch(method, path, body) or b"{}")

    def fetch(self, method: str, path: str, body: dict | None = None, *, login: bool = True) -> bytes:
        request = urllib.request.Request(
            self.base + path, method=method, data=json.dumps(body).encode() if body is not None else None
        )
        request.add_header("Content-Type", "application/json")
        if self.token and login:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise HttpError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, probe, timeout: float, every: float = 3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = probe()
        except (OSError, HttpError):  # not up yet, or not parsed yet
            found = None
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def airflow(tmp_path):
    """scripts/airflow.sh in its own process group, with only the daily_orders spec."""
    queries = tmp_path / "queries"
    shutil.copytree(ROOT / "conf" / "queries" / "data" / "daily_orders", queries / "data" / "daily_orders")
    spec = (ROOT / "conf" / "queries" / "daily_orders.yaml").read_text()
    assert 'schedule: "@daily"' in spec
    # A schedule that fires on the backfilled dates only. Unpausing a daily DAG (catchup off)
    # also starts the latest day's scheduled run, which would take the one Spark slot from the
    # backfill for a minute and more; this one's latest day is a backfilled date, which Airflow
    # then leaves to the backfill.
    (queries / "daily_orders.yaml").write_text(spec.replace('"@daily"', f'"{BACKFILL_CRON}"'))
    port = _free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW_PORT": str(port),
        "LOCKSTEP_QUERIES": str(queries),
        "LOCKSTEP_RUNS_DIR": str(tmp_path / "runs"),
        FAULT_AFTER_COMMIT: "1",
    }  # the first stream attempt dies after committing micro-batch 1
    for unit_test_setting in ("AIRFLOW__CORE__UNIT_TEST_MODE", "AIRFLOW__CORE__DAGS_FOLDER"):
        env.pop(unit_test_setting, None)
    log = open(tmp_path / "airflow.log", "w")
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "airflow.sh")], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    watch(process.pid)  # the group dies with this process even if its fixtures never run
    api = Airflow(f"http://127.0.0.1:{port}", tmp_path / "airflow")
    try:
        _wait("the API server and scheduler", lambda: _healthy(api), timeout=240)
        api.login()
        yield api, queries, tmp_path / "runs"
    finally:
        _stop(process)
        log.close()


def _healthy(api: Airflow) -> bool:
    health = api.call("GET", "/api/v2/monitor/health")
    return all(
        health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler", "dag_processor")
    )


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the whole process group, SIGKILL what is left after 30 s; assert none remain."""
    group = process.pid
    os.killpg(group, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 30
    while _group_alive(group) and time.monotonic() < deadline:
        time.sleep(1)
    if _group_alive(group):
        os.killpg(group, signal.SIGKILL)
        time.sleep(2)
    assert not _group_alive(group), "processes of the Airflow under test survived"


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    # Zombies (exited, not yet reaped) count as gone.
    states = subprocess.run(["ps", "-o", "stat=", "-g", str(group)], capture_output=True, text=True).stdout
    return any(not s.startswith("Z") for s in states.split())


def _runs(api: Airflow) -> dict[str, dict]:
    found = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=50")["dag_runs"]
    return {run["logical_date"][:10]: run for run in found if run["run_type"] == "backfill"}


def test_a_running_airflow_backfills_two_dates_and_retries_a_killed_stream(spark, airflow):
    api, queries, runs = airflow
    _wait("the DAG to be parsed", lambda: api.call("GET", f"/api/v2/dags/{DAG_ID}"), timeout=120)
    backfill = {
        "dag_id": DAG_ID,
        "from_date": f"{DATES[0]}T00:00:00Z",
        "to_date": f"{DATES[-1]}T00:00:00Z",
        "max_active_runs": 1,
        "reprocess_behavior": "failed",
    }  # depends_on_past needs a reprocess mode
    # On SQLite, creating a backfill while the scheduler writes answers 503 "database is locked".
    _wait("the backfill to be created", lambda: api.call("POST", "/api/v2/backfills", backfill), timeout=60)
    api.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})  # backfill runs need it

    def finished():
        found = _runs(api)
        states = {day: found.get(day, {}).get("state") for day in DATES}
        assert "failed" not in states.values(), states
        return all(state == "success" for state in states.values())

    _wait("both backfill runs", finished, timeout=900, every=5)
    api.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": True})
    every_run = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=50")["dag_runs"]
    assert {run["run_type"] for run in every_run} == {"backfill"}  # the schedule above started none

    first = _runs(api)[DATES[0]]["dag_run_id"]
    stream_task = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{first}/taskInstances/stream")
    assert stream_task["try_number"] == 2  # killed once, then resumed from the checkpoint

    query = runs / "daily_orders"
    for day in DATES:
        report = json.loads((query / "history" / day / "report.json").read_text())
        assert report["verdict"] == "pass" and report["logical_date"] == day
        assert (query / "history" / day / "report.html").is_file()
        # The check task links to its date's report page, which the plugin serves to a logged-in user.
        run_id = _runs(api)[day]["dag_run_id"]
        links = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/check/links")
        assert links["extra_links"] == {"lockstep report": f"/lockstep/runs/daily_orders/history/{day}/report.html"}
        page = api.fetch("GET", links["extra_links"]["lockstep report"]).decode()
        assert page == (query / "history" / day / "report.html").read_text()
        with pytest.raises(HttpError, match=": 401 "):
            api.fetch("GET", links["extra_links"]["lockstep report"], login=False)
    events = api.call("GET", "/api/v2/assets/events?source_dag_id=lockstep_daily_orders&limit=50")["asset_events"]
    assert sorted((e["name"], e["uri"], e["extra"]["logical_date"], e["extra"]["verdict"]) for e in events) == [
        ("lockstep.daily_orders", "lockstep://daily_orders/sink", day, "pass") for day in DATES
    ]
    assert "lockstep" in {p["package_name"] for p in api.call("GET", "/api/v2/providers")["providers"]}
    assert "lockstep" in {p["name"] for p in api.call("GET", "/api/v2/plugins")["plugins"]}
    point = json.loads((query / "_state" / "points" / f"{DATES[-1]}.json").read_text())

    # The same dates streamed without a crash give the same sink and change feed.
    clean = RunLayout.for_query(runs.parent / "clean", "daily_orders")
    plan = plan_query(load_spec(queries / "daily_orders.yaml"))
    for day in DATES:
        run_stream(plan, Settings(), clean, logical_date=date.fromisoformat(day))
    at = point["sink_version"]
    assert _rows(query / "stream", at) == _rows(clean.stream, None)
    assert _feed(query / "stream", at) == _feed(clean.stream, None)


def _rows(path: Path, version: int | None) -> list[dict]:
    table = DeltaTable(str(path), version=version).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: r["pId"])


def _feed(path: Path, version: int | None) -> Counter:
    feed = read_change_feed(path).to_pylist()
    if version is not None:
        feed = [r for r in feed if r["_commit_version"] <= version]
    return Counter((r["_change_type"], r["pId"], r["orders"], r["income"]) for r in feed)
