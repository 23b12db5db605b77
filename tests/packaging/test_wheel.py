"""lockstep as a package: the wheel `pip install .` builds, installed into a fresh virtualenv,
gives a working `lockstep` that imports nothing from this checkout.

The scratch environment takes its dependencies from this test's own environment (a path file
to links of every distribution but lockstep), and pip installs the wheel with --no-index: the
dependency ranges in pyproject.toml must then be met by the tested pins, or the install fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

OWN = ("lockstep", "__editable__", "jobs", "expectations", "operators_lib")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin folder of a fresh virtualenv with lockstep's wheel installed."""
    scratch = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(scratch / "dist")
    env = scratch / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    _link_dependencies(scratch / "deps", env)
    _run([env / "bin" / "python", "-m", "pip", "install", "--no-index", "--quiet", wheel], cwd=scratch)
    return env / "bin"


def _build_wheel(dist: Path) -> Path:
    """Built from a copy of the project's files: setuptools leaves build/ and egg-info folders in
    the tree it builds."""
    source = dist.parent / "source"
    listed = _run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout.split("\n")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            dist,
            source,
        ],
        cwd=dist.parent,
    )
    (wheel,) = dist.glob("lockstep-*.whl")
    return wheel


def _link_dependencies(deps: Path, env: Path) -> None:
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN):
            (deps / entry.name).symlink_to(entry)
    (site,) = (env / "lib").glob("python3.*/site-packages")
    (site / "lockstep-test-dependencies.pth").write_text(f"{deps}\n")


def _run(command: list, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.mark.slow
def test_the_installed_package_imports_from_the_virtualenv_with_its_data_files(installed, tmp_path):
    where = _run(
        [
            installed / "python",
            "-c",
            "import jobs.runtime.spark as s, expectations.report as r; print(s.LOG_CONFIG.is_file(), s.__file__)",
        ],
        cwd=tmp_path,
    ).stdout.split()
    assert where[0] == "True"
    assert Path(where[1]).is_relative_to(installed.parent)
    version = _run([installed / "lockstep", "--version"], cwd=tmp_path).stdout
    assert version.strip().startswith("lockstep ") and "unknown" not in version
    providers = _run(
        [
            installed / "python",
            "-c",
            "from importlib.metadata import entry_points; "
            "print(sorted(e.value for e in entry_points(group='apache_airflow_provider')))",
        ],
        cwd=tmp_path,
    ).stdout
    assert "operators_lib.provider:get_provider_info" in providers


@pytest.mark.slow
def test_the_installed_command_explains_and_runs_a_query(installed, tmp_path):
    spec = tmp_path / "income.yaml"
    spec.write_text(
        (ROOT / "conf" / "queries" / "income_per_product.yaml").read_text().replace("path: data/orders", "path: orders")
    )
    shutil.copytree(ROOT / "conf" / "queries" / "data" / "orders", tmp_path / "orders")
    explained = _run([installed / "lockstep", "explain", spec], cwd=tmp_path).stdout
    assert "GroupAggregate(groupBy=[pId]" in explained
    ran = _run([installed / "lockstep", "run", spec, "--out", tmp_path / "runs"], cwd=tmp_path, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "income_per_product: PASS  stream 3 rows, batch 3 rows" in ran.stdout
    assert (tmp_path / "runs" / "income_per_product" / "report.json").is_file()
