"""`lockstep explain` output, golden-tested (tests/golden/explain_cases.py lists the cases). The
comparison never writes: `make golden` (python -m tests.golden.update) rewrites the plans after
an intended change."""

import os
import subprocess
import sys

import pytest

from tests.golden.explain_cases import CASES, ROOT, explained, golden_of

EVERY_PLAN = "from tests.golden.explain_cases import CASES, explained\nprint('\\f'.join(map(explained, CASES)), end='')"


@pytest.mark.parametrize("spec_path", CASES, ids=[p.stem for p in CASES])
def test_explain_matches_the_golden_plan(spec_path):
    golden = golden_of(spec_path)
    assert golden.exists(), f"no golden file {golden}; `make golden` writes it"
    assert explained(spec_path) == golden.read_text()


def test_explain_is_the_same_in_fresh_processes_whatever_their_hash_seed():
    """Set order and hashing differ between processes (PYTHONHASHSEED): a plan that printed a set
    or an id would differ here even when one process prints it the same twice."""
    plans = [_every_plan_in_a_process(seed) for seed in ("1", "2", "random")]
    assert plans[0] == plans[1] == plans[2]
    assert plans[0].split("\f") == [golden_of(spec).read_text() for spec in CASES]


def _every_plan_in_a_process(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", EVERY_PLAN], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
