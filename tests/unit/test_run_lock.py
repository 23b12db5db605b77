"""One writer per run folder: a second `lockstep` command on a folder in use is refused at once,
naming the holder; a lock left by a killed process is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from jobs.errors import RunLocked
from jobs.runtime.lock import run_lock
from tests.conftest import ROOT, change, orders_spec, write_changelog

HOLD = (
    "import sys, time; from jobs.runtime.lock import run_lock; "
    "run_lock(sys.argv[1]).__enter__(); print('held', flush=True); time.sleep(120)"
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of runs/q."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "runs" / "q")], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout.readline().strip() == "held"
    yield process
    process.kill()
    process.wait()


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path, holder):
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 5)])
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total FROM orders GROUP BY pId")
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli.main", "run", str(spec), "--out", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "\n" not in line and f"in use by pid {holder.pid}" in line and "since" in line
    assert not (tmp_path / "runs" / "q").exists()  # nothing written


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path, holder):
    with pytest.raises(RunLocked):
        with run_lock(tmp_path / "runs" / "q"):
            pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with run_lock(tmp_path / "runs" / "q") as lock:  # the kernel released it with its holder
        assert f'"pid": {os.getpid()}' in lock.path.read_text()


def test_a_step_that_calls_another_takes_the_lock_once(tmp_path):
    lock = run_lock(tmp_path / "runs" / "q")
    with lock:
        with run_lock(tmp_path / "runs" / "q"):  # run -> stream: the same lock, held already
            pass
        assert lock.path.exists()
