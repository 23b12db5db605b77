"""A process may stop its Spark session and start another (the differential run does, every 50
cases): the JVM outlives the stopped session even when a background start launched it, so the
next session starts on a live gateway. In a child process, so that the suite's shared session
is not the one stopped."""

import subprocess
import sys

from tests.conftest import ROOT

CHILD = """
from jobs.runtime.spark import spark_session, start_in_background, stop_session
start_in_background()
assert spark_session().range(3).count() == 3
stop_session()
assert spark_session().range(4).count() == 4
print("alive after restart")
"""


def test_a_session_started_in_the_background_can_be_stopped_and_started_again():
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "alive after restart" in done.stdout
