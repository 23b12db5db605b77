"""batch_result: on the batch result, one row per key, so a comparison by key is one of rows."""

from __future__ import annotations

from expectations.columns import Columns
from expectations.sql import VALIDATED, duplicate_keys
from expectations.suites import LockstepExpectation, SuiteSpec


class ExpectBatchKeyUnique(LockstepExpectation):
    description: str = (
        "The batch result has at most one row per sink primary key, so a comparison by key is a comparison of rows."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return duplicate_keys(cols, VALIDATED)


def batch_result_suite(cols: Columns) -> SuiteSpec:
    return SuiteSpec("batch_result", "batch_result", (ExpectBatchKeyUnique.build(cols),))
