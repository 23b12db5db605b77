"""`lockstep explain` output, golden-tested: tests/golden/explain/<case>.yaml is the spec and
<case>.txt the expected plan. The demo specs in conf/queries are cases too.
Set LOCKSTEP_UPDATE_GOLDEN=1 to rewrite the .txt files after an intended change."""

import os
from pathlib import Path

import pytest

from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "explain"
CASES = sorted(GOLDEN.glob("*.yaml")) + sorted((ROOT / "conf" / "queries").glob("*.yaml"))


@pytest.mark.parametrize("spec_path", CASES, ids=[p.stem for p in CASES])
def test_explain_matches_the_golden_plan(spec_path):
    text = explain(plan_query(load_spec(spec_path)))
    expected = GOLDEN / f"{spec_path.stem}.txt"
    if os.environ.get("LOCKSTEP_UPDATE_GOLDEN"):
        expected.write_text(text)
    assert expected.exists(), f"no golden file {expected}; run with LOCKSTEP_UPDATE_GOLDEN=1"
    assert text == expected.read_text()


def test_explain_is_deterministic_across_runs():
    spec = load_spec(CASES[0])
    assert explain(plan_query(spec)) == explain(plan_query(spec))
