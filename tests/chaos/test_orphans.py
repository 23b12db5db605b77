"""kill -9 of a lockstep process leaves no Spark JVM behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

START = ("from jobs.runtime.spark import spark_session; import os, time; "
         "s = spark_session(); print(s.sparkContext._jvm.ProcessHandle.current().pid(), flush=True); time.sleep(300)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = open(f"/proc/{pid}/stat").read().split()[2] if os.path.exists(f"/proc/{pid}/stat") else "X"
    return state not in ("Z", "X")


def test_the_jvm_goes_with_a_killed_driver():
    driver = subprocess.Popen([sys.executable, "-c", START], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    jvm = int(driver.stdout.readline())
    assert _alive(jvm)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 20
    while _alive(jvm) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(jvm), f"the JVM {jvm} outlived its killed driver"
