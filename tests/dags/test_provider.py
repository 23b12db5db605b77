"""lockstep as an installed Airflow provider: Airflow's own managers discover its provider info,
connection type, report link and plugin, and the plugin serves the runs folder, no further."""

from __future__ import annotations

import pytest


def test_the_provider_is_discovered_with_its_connection_type_and_report_link(airflow_db):
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "lockstep" in manager.providers
    assert manager.hooks["lockstep"].hook_class_name == "operators_lib.hook.LockstepHook"
    assert "operators_lib.lockstep_operators.ReportLink" in manager.extra_links_class_names


def test_the_report_plugin_is_loaded_with_its_web_app(airflow_db):
    from airflow import plugins_manager

    (lockstep,) = [p for p in plugins_manager.get_plugin_info() if p["name"] == "lockstep"]
    assert [app["url_prefix"] for app in lockstep["fastapi_apps"]] == ["/lockstep"]


@pytest.fixture
def client(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from operators_lib.plugin import reports_app

    runs = tmp_path / "runs"
    (runs / "q" / "history" / "2026-11-21").mkdir(parents=True)
    (runs / "q" / "history" / "2026-11-21" / "report.html").write_text("<h1>q: PASS</h1>")
    (tmp_path / "secret.txt").write_text("not a report")
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", str(runs))
    app = reports_app()
    yield app, TestClient(app)
    app.dependency_overrides.clear()


def test_the_plugin_serves_report_files_to_a_logged_in_user_and_nothing_outside_the_runs_folder(client):
    from airflow.api_fastapi.core_api.security import get_user

    app, http = client
    assert http.get("/runs/q/history/2026-11-21/report.html").status_code == 401  # no login
    app.dependency_overrides[get_user] = lambda: "tester"
    page = http.get("/runs/q/history/2026-11-21/report.html")
    assert page.status_code == 200 and page.text == "<h1>q: PASS</h1>"
    assert http.get("/runs/../secret.txt").status_code == 404
    assert http.get("/runs/%2e%2e/secret.txt").status_code == 404
    assert http.get("/runs/q/history").status_code == 404  # a folder
