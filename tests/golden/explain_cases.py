"""The golden `explain` cases: tests/golden/explain/<case>.yaml is a spec and <case>.txt its
expected plan; the specs in conf/queries are cases too (their plans in the same folder)."""

from __future__ import annotations

from pathlib import Path

from jobs.plan import plan_query
from jobs.plan.explain import explain
from jobs.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "explain"
CASES = sorted(GOLDEN.glob("*.yaml")) + sorted((ROOT / "conf" / "queries").glob("*.yaml"))


def explained(spec_path: Path) -> str:
    return explain(plan_query(load_spec(spec_path)))


def golden_of(spec_path: Path) -> Path:
    return GOLDEN / f"{spec_path.stem}.txt"
