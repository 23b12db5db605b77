"""The differing rows of a check as the report shows them: missing and extra rows whole, and
mismatched rows side by side, stream value next to batch value, with the differing columns named.

Built from the samples the unity expectations returned (their unexpected rows), so the page shows
exactly what Great Expectations found.
"""

from __future__ import annotations

from expectations.columns import Columns
from expectations.report.model import ExpectationOutcome
from expectations.suites.unity import (
    MISMATCH_SUFFIXES,
    ExpectNoExtraRowsInStream,
    ExpectNoMismatchedValues,
    ExpectNoRowsMissingFromStream,
)


def differences_section(cols: Columns, outcomes: list[ExpectationOutcome]) -> dict:
    samples = {o.name: list(o.sample) for o in outcomes if not o.success}
    stream_suffix, batch_suffix = MISMATCH_SUFFIXES
    mismatched = []
    for row in samples.get(ExpectNoMismatchedValues.expectation_type, []):
        stream = {v: row.get(v + stream_suffix) for v in cols.values}
        batch = {v: row.get(v + batch_suffix) for v in cols.values}
        mismatched.append(
            {
                "key": {k: row.get(k) for k in cols.key},
                "stream": stream,
                "batch": batch,
                "differing": [v for v in cols.values if not cols.same(v, stream[v], batch[v])],
            }
        )
    return {
        "key": list(cols.key),
        "values": list(cols.values),
        "missing": samples.get(ExpectNoRowsMissingFromStream.expectation_type, []),
        "extra": samples.get(ExpectNoExtraRowsInStream.expectation_type, []),
        "mismatched": mismatched,
    }
