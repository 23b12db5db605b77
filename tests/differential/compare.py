"""Compare lockstep's outcome with the reference: the final sink table must equal Flink's final
result as a multiset (floating values within a tolerance), the changes the stream left out as late
must be the ones the case's watermark drops (late_changes.py), lockstep's verdict must be PASS, or
FAIL with the late events explaining all of the difference, and where Flink's result is an
append-only changelog the sink's change feed must hold inserts only.

Values are compared by what they mean: Flink writes decimals and timestamps as strings, lockstep
reads them from Delta as Decimal and datetime (UTC); numbers compare numerically, so DECIMAL(38,6)
and DECIMAL(14,6) results with equal values are equal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from tests.differential.case import Case
from tests.differential.lockstep_side import LockstepOutcome

ABS_TOL, REL_TOL = 1e-6, 1e-9


@dataclass(frozen=True)
class Finding:
    passed: bool
    reason: str = ""  # one line: what differs

    @property
    def refused_by_engine(self) -> bool:
        """lockstep refused the case because the chosen engine does not run its class yet."""
        return self.reason.startswith("lockstep rejects") and "does not run" in self.reason

    @property
    def kind(self) -> str:
        """A short signature of the failure, for shrinking (a smaller case must fail the same way):
        what went wrong, and for a rejection or a crash the message without its file and line."""
        if not self.reason:
            return "pass"
        what, _, detail = self.reason.partition(": ")
        if what not in ("lockstep rejects", "lockstep crashes"):
            return what
        message = re.sub(r"^\S+\.yaml(:\d+)?: ", "", detail)
        return f"{what}: {re.sub(r'[0-9]+', 'N', message)[:80]}"


def compare(case: Case, lockstep: LockstepOutcome, reference: dict) -> Finding:
    if reference.get("error"):
        return Finding(False, f"oracle rejects the case: {reference['error'][:300]}")
    if lockstep.error:
        kind = "lockstep crashes" if lockstep.crashed else "lockstep rejects"
        return Finding(False, f"{kind}: {lockstep.error[:300]}")
    columns = column_difference(lockstep.columns, reference)
    if columns:
        return Finding(False, f"columns differ: {columns}")
    difference = row_difference(lockstep.columns, lockstep.rows, reference)
    if difference:
        return Finding(False, f"sink differs from the reference: {difference}")
    # A window over a deduplication lists the deduplication's rows it left out, not the source's.
    over_stage = case.query_class == "window_over_deduplicate"
    late = "" if over_stage else late_difference(case, lockstep.late_rows)
    if late:
        return Finding(False, f"late changes differ: {late}")
    dropped = bool(_dropped(case)) or (over_stage and bool(lockstep.late_rows))
    if lockstep.verdict != "pass" and not (dropped and lockstep.late_explains == "all"):
        return Finding(False, "lockstep verdict is FAIL although the sink equals the reference")
    if _append_only(case, reference) and set(lockstep.feed_kinds) - {"+I"}:
        return Finding(
            False, f"append query: the reference emits inserts only, the sink's change feed has {lockstep.feed_kinds}"
        )
    return Finding(True)


def _dropped(case: Case) -> list[int]:
    return [i for source in case.sources for i in source.late]


def late_difference(case: Case, left_out: list[int]) -> str:
    """'' when the stream left out exactly the changes the case's watermark drops, else which."""
    expected = sorted(_dropped(case))
    if left_out == expected:
        return ""
    return f"lockstep left out changes {left_out[:10]}, the watermark drops {expected[:10]}"


def column_difference(columns: list[str], reference: dict) -> str:
    """'' when the sink has the reference's columns (names compared without case), else both."""
    names = {n.lower() for n in columns}
    missing = [c for c in reference["columns"] if c.lower() not in names]
    if missing or len(names) != len(reference["columns"]):
        return f"lockstep {columns}, reference {reference['columns']}"
    return ""


def row_difference(columns: list[str], rows: list[dict], reference: dict) -> str:
    """'' when the sink's rows (with the reference's columns, column_difference) are the
    reference's final rows as a multiset, floating values within the tolerance; else what differs."""
    names = {n.lower(): n for n in columns}
    ours = [tuple(_value(row[names[c.lower()]]) for c in reference["columns"]) for row in rows]
    theirs = [tuple(_value(v) for v in row) for row in reference["final"]]
    return _multiset_difference(ours, theirs)


def _append_only(case: Case, reference: dict) -> bool:
    """An append query: Flink's planner gives its result the changelog mode [I]. (emit: early is
        lockstep's update-mode window, a different query from Flink's window TVF, which is final. A
        temporal join's and an OVER aggregation's rows are corrected by lockstep when a row that goes
        before them comes later, where Flink waits for the watermark; so are a Top-N per window's rows
    over a window's rows without an aggregate: docs/sql.md.)"""
    eager = case.sink.get("emit") == "early" or case.query_class.startswith(
        ("temporal_join", "over_", "window_rank", "window_join")
    )
    return bool(reference.get("append")) and not eager


def _value(value):
    """A value as both sides can compare it: numbers as Decimal or float, times as naive UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, str):
        return _parsed(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    return value


def _parsed(text: str):
    """Flink writes decimals, timestamps and NaN as strings; plain strings stay strings."""
    try:
        return datetime.fromisoformat(text) if "T" in text and text[:4].isdigit() else Decimal(text)
    except (ValueError, ArithmeticError):
        return text


def _multiset_difference(ours: list[tuple], theirs: list[tuple]) -> str:
    """'' when equal; else how many rows each side has that the other lacks, with an example."""
    remaining = sorted(theirs, key=_order)
    extra = []
    for row in sorted(ours, key=_order):
        match = next((i for i, other in enumerate(remaining) if _same_row(row, other)), None)
        if match is None:
            extra.append(row)
        else:
            remaining.pop(match)
    if not extra and not remaining:
        return ""
    parts = []
    if extra:
        parts.append(f"{len(extra)} row(s) only in lockstep's sink, e.g. {_show(extra[0])}")
    if remaining:
        parts.append(f"{len(remaining)} row(s) only in the reference, e.g. {_show(remaining[0])}")
    return f"{len(ours)} vs {len(theirs)} rows; " + "; ".join(parts)


def _order(row: tuple):
    return tuple(
        (v is None, type(v).__name__, round(float(v), 4) if isinstance(v, (float, Decimal)) else v) for v in row
    )


def _same_row(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _same(x, y) -> bool:
    if x is None or y is None:
        return x is None and y is None
    numeric = (int, float, Decimal)
    if isinstance(x, numeric) and isinstance(y, numeric) and not isinstance(x, bool):
        fx, fy = float(x), float(y)
        if math.isnan(fx) or math.isnan(fy):
            return math.isnan(fx) and math.isnan(fy)
        return abs(fx - fy) <= ABS_TOL + REL_TOL * max(abs(fx), abs(fy))
    return x == y


def _show(row: tuple) -> str:
    return "(" + ", ".join("NULL" if v is None else str(v) for v in row) + ")"
