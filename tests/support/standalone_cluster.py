"""A Spark standalone cluster on this machine, started with pyspark's own launcher: a master and
workers, each its own JVM (`bin/spark-class` running the Master and Worker classes, as
sbin/start-master.sh would; the pip package has no sbin/), all on 127.0.0.1.

The master starts first, and its ports are read back from its log rather than assumed: a worker's
RPC port, or anything else on the machine, may take a port we picked before the master binds it,
and Spark then quietly moves to the next one.

Every JVM gets a parent-death signal, so a test process killed outright takes its cluster along;
`stop()` ends them in the ordinary case, and the context manager calls it whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pyspark

from jobs.cli.local_store import (  # one of each for every server the tests start
    LocalServer,
    _dies_with_parent,
    ended,
    free_port,
)

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_URL = re.compile(r"Starting Spark master at spark://[^:]+:(\d+)")
MASTER_UI = re.compile(r"MasterWebUI: Bound MasterWebUI to .*started at http://[^:]+:(\d+)")


class StandaloneCluster(LocalServer):
    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "2g"):
        self.workdir, self.workers, self.cores, self.memory = workdir, workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        self.port = self._port_from_master_log(MASTER_URL, deadline)
        self.ui_port = self._port_from_master_log(MASTER_UI, deadline)
        for n in range(self.workers):
            self._launch(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(self.workdir / f"worker-{n}"),
                self.url,
            )
        self._wait_for_workers(deadline)

    def _port_from_master_log(self, line: re.Pattern, deadline: float) -> int:
        log = self.workdir / "master.log"
        while not (found := line.search(log.read_text(errors="replace"))):
            self._fail_if_down_or_late(deadline, f"no line matching {line.pattern!r} in {log}")
            time.sleep(0.25)
        return int(found.group(1))

    def _launch(self, name: str, main_class: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOG_DIR": str(self.workdir),
            "SPARK_WORKER_DIR": str(self.workdir),
        }
        log = open(self.workdir / f"{name}.log", "wb")
        self.processes.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_dies_with_parent,
            )
        )

    def kill_worker(self, n: int) -> None:
        """kill -9 worker n and every process it started (its executors), as when a machine is
        lost: nothing of theirs says goodbye to the master or the driver."""
        worker = self.processes[1 + n]
        for process in [*psutil.Process(worker.pid).children(recursive=True), psutil.Process(worker.pid)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        worker.wait()

    def executor_logs(self, n: int) -> list[Path]:
        """The stderr of each executor worker n has run (work-dir/<app>/<executor>/stderr)."""
        return sorted((self.workdir / f"worker-{n}").glob("*/*/stderr"))

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as page:
                return int(json.load(page).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def _wait_for_workers(self, deadline: float) -> None:
        while self.alive_workers() < self.workers:
            self._fail_if_down_or_late(deadline, f"{self.alive_workers()} of {self.workers} workers alive")
            time.sleep(0.5)

    def _fail_if_down_or_late(self, deadline: float, waiting_for: str) -> None:
        dead = [p.args[1] for p in self.processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = "exited: " + ", ".join(dead) if dead else f"timed out: {waiting_for}"
            raise RuntimeError(f"the standalone cluster did not come up ({why})\n{self._log_tails()}")

    def _log_tails(self, lines: int = 15) -> str:
        # CI shows only the test's output, so the JVMs' own last words go into the error.
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in sorted(self.workdir.glob("*.log"))
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            ended(process, wait=30)
        self.processes.clear()
