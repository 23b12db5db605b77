"""kill -9 of a lockstep process leaves no Spark JVM behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

START = (
    "from jobs.runtime.spark import spark_session; import os, time; "
    "s = spark_session(); print(s.sparkContext._jvm.ProcessHandle.current().pid(), flush=True); time.sleep(300)"
)
# Started on a thread of its own while the main thread works: the JVM must outlive that thread's
# start (a job runs after it) and still go with the killed driver.
START_IN_BACKGROUND = (
    "from jobs.runtime.spark import spark_session, start_in_background; import time; "
    "start_in_background(); time.sleep(1); s = spark_session(); time.sleep(2); "
    "assert s.range(5).count() == 5 and s.getActiveSession() is not None; "
    "print(s.sparkContext._jvm.ProcessHandle.current().pid(), flush=True); time.sleep(300)"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = open(f"/proc/{pid}/stat").read().split()[2] if os.path.exists(f"/proc/{pid}/stat") else "X"
    return state not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.parametrize("start", [START, START_IN_BACKGROUND], ids=["on_the_main_thread", "in_the_background"])
def test_the_jvm_goes_with_a_killed_driver(start):
    driver = subprocess.Popen([sys.executable, "-c", start], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    jvm = int(driver.stdout.readline())
    assert _alive(jvm)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 20
    while _alive(jvm) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(jvm), f"the JVM {jvm} outlived its killed driver"
