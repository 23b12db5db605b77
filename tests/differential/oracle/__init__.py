"""The Flink oracle from lockstep's side: the runner (flink_runner.py) in its own environment,
.venv-flink, started once and fed case files over stdin; no import crosses the two.

    with FlinkOracle(workdir) as oracle:
        result = oracle.ask(case)   # {"columns", "changelog", "final", "error", "seconds"}
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from tests.differential.case import Case

ROOT = Path(__file__).resolve().parents[3]
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"
RUNNER = Path(__file__).with_name("flink_runner.py")
# A case Flink has not answered by then is an oracle failure. Three large cases missed 180 s in
# a N=300 run that shared the two cores with other work; all three passed when run again alone
# (a join-then-aggregate case of 1,700 rows: 174 s for both engines together).
CASE_SECONDS = 600


class OracleUnavailable(RuntimeError):
    """The Flink environment is missing: `make setup` (or `make test`) creates it."""


class FlinkOracle:
    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.process: subprocess.Popen | None = None
        # Answers by the case as Flink reads it: the same case on both engines asks Flink once.
        self._answers: dict[str, str] = {}

    def __enter__(self) -> FlinkOracle:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def ask(self, case: Case) -> dict:
        """Flink's answer for the case (an `error` key when Flink rejects or fails it)."""
        asked = json.dumps(case.for_flink())
        if asked in self._answers:
            return json.loads(self._answers[asked])
        case_file = self.workdir / f"{case.name}.flink.json"
        out_file = self.workdir / f"{case.name}.flink-out.json"
        case_file.write_text(asked)
        out_file.unlink(missing_ok=True)
        if not self._request(case_file, out_file):
            self.close()  # a hung JVM: the next case starts a fresh one
            return {"error": f"Flink gave no answer within {CASE_SECONDS} s"}
        self._answers[asked] = out_file.read_text()
        return json.loads(self._answers[asked])

    def _request(self, case_file: Path, out_file: Path) -> bool:
        process = self._server()
        process.stdin.write(f"{case_file} {out_file}\n")
        process.stdin.flush()
        answered = threading.Event()

        def wait_for_done() -> None:
            for line in process.stdout:  # anything else Flink prints is not an answer
                if line.startswith("done "):
                    answered.set()
                    return

        threading.Thread(target=wait_for_done, daemon=True).start()
        return answered.wait(CASE_SECONDS)

    def _server(self) -> subprocess.Popen:
        if self.process is not None and self.process.poll() is None:
            return self.process
        if not FLINK_PYTHON.exists():
            raise OracleUnavailable(f"{FLINK_PYTHON} is missing: run `make setup` to create the Flink environment")
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "FLINK_LOG_DIR": str(self.workdir / "flink-log")}
        env.pop("PYTHONPATH", None)  # nothing of lockstep's environment leaks into Flink's
        self.process = subprocess.Popen(
            [str(FLINK_PYTHON), str(RUNNER), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.workdir / "flink-runner.err", "a"),
            text=True,
            env=env,
        )
        return self.process

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
