"""How long `lockstep explain` takes to refuse each hostile spec of tests/unit/test_hostile_specs.py
(YAML nested too deep, SQL of 60,000 expression nodes, ...): each should cost a fraction of a
second, never minutes. Prints one line per case, in a process of its own per case.

    python -m tests.benchmarks.bench_hostile_specs
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.unit.test_hostile_specs import HOSTILE


def main() -> None:
    print(f"{'case':<6} {'seconds':>8} {'exit':>5}  first words of the error")
    for number, (text, _) in enumerate(HOSTILE):
        with tempfile.TemporaryDirectory() as folder:
            spec = Path(folder) / "q.yaml"
            spec.write_bytes(text if isinstance(text, bytes) else text.encode())
            (Path(folder) / "orders").mkdir()
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "jobs.cli.main", "explain", str(spec)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            seconds = time.monotonic() - started
        print(f"{number:<6} {seconds:>8.2f} {result.returncode:>5}  {result.stderr.strip()[:70]}")


if __name__ == "__main__":
    main()
