"""The differing rows of a check as the report shows them: missing and extra rows whole, and
mismatched rows side by side, stream value next to batch value, with the differing columns named.

Built from the samples the unity expectations returned (their unexpected rows), so the page shows
exactly what Great Expectations found.
"""

from __future__ import annotations

import math

from expectations.queries import MISMATCH_SUFFIXES, Columns

MISSING = "expect_no_rows_missing_from_stream"
EXTRA = "expect_no_extra_rows_in_stream"
MISMATCHED = "expect_no_mismatched_values"


def side_by_side(cols: Columns, samples: dict[str, list[dict]]) -> dict:
    stream_suffix, batch_suffix = MISMATCH_SUFFIXES
    mismatched = []
    for row in samples.get(MISMATCHED, []):
        stream = {v: row.get(v + stream_suffix) for v in cols.values}
        batch = {v: row.get(v + batch_suffix) for v in cols.values}
        mismatched.append({"key": {k: row.get(k) for k in cols.key}, "stream": stream, "batch": batch,
                           "differing": [v for v in cols.values if not _same(v, stream[v], batch[v], cols)]})
    return {"key": list(cols.key), "values": list(cols.values), "missing": samples.get(MISSING, []),
            "extra": samples.get(EXTRA, []), "mismatched": mismatched}


def _same(column: str, a, b, cols: Columns) -> bool:
    """Equal as the expectation compares them: floating columns within the tolerance."""
    if column in cols.floating and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= cols.abs_tol + cols.rel_tol * max(abs(a), abs(b))
    return a == b
