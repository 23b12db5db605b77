"""Synthetic report.json dicts, built through the Report model `lockstep check` writes them
with (no Spark needed): a field renamed in the model changes these too, and the page tests see
it."""

from __future__ import annotations

import copy

import pytest

from expectations.report.model import ExpectationOutcome, Report

SCRIPT = "<script>alert(1)</script>"
PLAN = """== orders_per_product ==
Sink(table=[orders_per_product], primaryKey=[pId], upsertMaterialize=[false]), changelogMode=[I,UA,D]
+- GroupAggregate(groupBy=[pId], select=[pId, SUM(income) AS income, COUNT(*) AS n]), changelogMode=[I,UA,D]
   +- ChangelogSource(table=[orders], format=[changelog-json]), changelogMode=[I,UB,UA,D]
"""


def _micro_batch(batch: int, changes: tuple[int, int, int, int], state_rows: int | None, seconds: float) -> dict:
    return {
        "batch": batch,
        "start_seq": batch * 4,
        "end_seq": batch * 4 + 4,
        "rows": 4,
        "changelog": dict(zip(("+I", "-U", "+U", "-D"), changes)),
        "seconds": seconds,
        "replayed": False,
        "state_rows": state_rows,
    }


FAILING = Report(
    query="orders_per_product",
    description="income per product, <b>bold</b> on purpose",
    verdict="fail",
    warnings=("non-deterministic function rand() at conf/queries/q.yaml line 3: results differ between runs",),
    stream_rows=3,
    batch_rows=3,
    missing_rows=1,
    extra_rows=1,
    mismatched_rows=1,
    changelog={"+I": 5, "-U": 2, "+U": 2, "-D": 1},
    expectations=(
        ExpectationOutcome("unity", "expect_table_row_count_to_equal", True, None),
        ExpectationOutcome(
            "unity", "expect_no_rows_missing_from_stream", False, 1, sample=({"pId": 3, "income": 10, "n": 1},)
        ),
        ExpectationOutcome(
            "unity",
            "expect_no_mismatched_values",
            False,
            1,
            sample=({"pId": 1, "income__stream": 7, "income__batch": 8},),
        ),
        ExpectationOutcome("retraction", "expect_no_ghost_retractions", True, 0),
    ),
    consistency_point={"sink_version": 4, "sources": {"orders": {"rows": 16, "watermark": 1_795_600_860_000_000}}},
    quarantined_rows=0,
    source_anomalies=0,
    rows_with_absent_fields=0,
    micro_batches=[
        _micro_batch(0, (2, 0, 0, 0), 2, 1.2),
        _micro_batch(1, (1, 1, 1, 0), 3, 0.8),
        _micro_batch(2, (2, 1, 1, 1), None, 0.6),
    ],
    sink={"path": "stream", "primary_key": ["pId"], "version": 4},
    data_docs="gx/uncommitted/data_docs/local_site/index.html",
    plan=PLAN,
    checked_at="2026-11-22T18:13:29Z",
    diagnosis={
        "differing_rows": 12,
        "explained_rows": 10,
        "unexplained_rows": 2,
        "summary": "12 rows differ: 10 explained by late events, 2 unexplained",
        "causes": [
            {
                "cause": "late_events",
                "title": "Late events dropped by the watermark",
                "rows": 10,
                "detail": "changes to windows the watermark had closed",
                "sample": [{"pId": 1, "difference": "different values"}],
            },
            {
                "cause": "unexplained",
                "title": "Unexplained",
                "rows": 2,
                "detail": "no known cause",
                "sample": [{"pId": 9, "difference": "extra in stream"}],
            },
        ],
    },
    differences={
        "key": ["pId"],
        "values": ["income", "n"],
        "missing": [{"pId": 3, "income": 10, "n": 1}, {"pId": 4, "income": SCRIPT, "n": 2}],
        "extra": [{"pId": 9, "income": 5, "n": 2}],
        "mismatched": [
            {
                "key": {"pId": 1},
                "stream": {"income": 7, "n": 2},
                "batch": {"income": 8, "n": 2},
                "differing": ["income"],
            }
        ],
    },
    check_seconds=12.5,
    logical_date=None,
    rechecked_by_time_travel=False,
    listed_rows={
        "late_events": {
            "table": "late_events",
            "total": 10,
            "rows": [
                {
                    "window_start": "2026-11-25 09:00:00 UTC",
                    "window_end": "2026-11-25 09:01:00 UTC",
                    "op": "+I",
                    "order_id": 41,
                    "pId": 1,
                    "income": 3,
                    "order_time": "2026-11-25 09:00:12 UTC",
                }
            ],
        }
    },
).to_json()

# What a report.json written before plan/diagnosis/differences/warnings existed looks like.
OLD_PASSING = {
    key: copy.deepcopy(value)
    for key, value in FAILING.items()
    if key not in ("plan", "warnings", "explanation", "differences", "diagnosis")
}
OLD_PASSING.update(
    verdict="pass",
    missing_rows=0,
    extra_rows=0,
    mismatched_rows=0,
    samples={},
    description="an older report",
    checked_at="2026-11-21T09:00:00Z",
    expectations=[{**e, "success": True} for e in FAILING["expectations"]],
)


@pytest.fixture
def failing() -> dict:
    return copy.deepcopy(FAILING)


@pytest.fixture
def old_passing() -> dict:
    return copy.deepcopy(OLD_PASSING)
