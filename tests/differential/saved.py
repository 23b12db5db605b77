"""Saved regression cases: a shrunk failing case with Flink's answer for it, replayed by the test
suite without PyFlink (tests/differential/test_differential.py).

    tests/differential/regressions/<case name>.json
        case        the case (generate.py's shape)
        reference   Flink's answer: columns, final table, append or not (older files also hold
                    Flink's output changelog, which the runner no longer collects)
        finding     what lockstep did wrong when it was found
        defect      while the defect is open: where it is tracked; the replay then expects the
                    failure (and fails once it is gone, so the mark is removed with the fix)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.differential.case import Case
from tests.differential.compare import Finding

FOLDER = Path(__file__).with_name("regressions")
REFERENCE_KEYS = ("columns", "final", "append", "error")  # what the comparison reads


@dataclass(frozen=True)
class Regression:
    path: Path
    case: Case
    reference: dict
    finding: str
    defect: str | None


def save_regression(case: Case, reference: dict, finding: Finding, folder: Path = FOLDER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case.name}.json"
    kept = {k: reference.get(k) for k in REFERENCE_KEYS}
    path.write_text(
        json.dumps({"case": case.to_json(), "reference": kept, "finding": finding.reason, "defect": None}, indent=1)
    )
    return path


def load_regressions(folder: Path = FOLDER) -> list[Regression]:
    found = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        found.append(
            Regression(path, Case.from_json(data["case"]), data["reference"], data["finding"], data.get("defect"))
        )
    return found


def refresh_reference(regression: Regression, reference: dict) -> None:
    """Store Flink's answer again (after a change to the runner), keeping the rest."""
    data = json.loads(regression.path.read_text())
    data["reference"] = {k: reference.get(k) for k in REFERENCE_KEYS}
    regression.path.write_text(json.dumps(data, indent=1))
