"""The Airflow 3 plugin that serves lockstep's reports from the API server, so a check task's
report link opens over HTTP (browsers block file:// links from a web page).

    GET /lockstep/                     the runs folder's index.html
    GET /lockstep/runs/<path>          a file of the runs folder: report pages, report.json,
                                       Great Expectations' Data Docs

Routes need an Airflow login, as the REST API does (a plugin's routes are open by default, and
reports hold rows of data). The runs folder is the one the DAGs write to (LOCKSTEP_RUNS_DIR,
else the settings' runs_dir).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

from jobs.spec.locations import local_runs_folder
from operators_lib.dag_defaults import PLUGIN_PREFIX, runs_dir

URL_PREFIX = PLUGIN_PREFIX


def reports_app() -> FastAPI:
    app = FastAPI(title="lockstep reports", description=__doc__)

    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse(f"{URL_PREFIX}/runs/index.html")

    @app.get("/runs/{path:path}")
    def runs_file(path: str, user: Annotated[Any, Depends(get_user)]) -> FileResponse:
        return FileResponse(inside(local_runs_folder(runs_dir()), path))

    return app


def inside(root: Path, relative: str) -> Path:
    """The file `relative` names under `root`; 404 for anything else (a folder, a missing file,
    a path that leaves root by .. or a link)."""
    base = root.resolve()
    file = (base / relative).resolve()
    if not file.is_relative_to(base) or not file.is_file():
        raise HTTPException(status_code=404, detail="no such report file")
    return file


class LockstepPlugin(AirflowPlugin):
    name = "lockstep"
    fastapi_apps = [{"app": reports_app(), "url_prefix": URL_PREFIX, "name": "lockstep reports"}]
