"""materializer: on the upsert materializer's live rows, one distinct row per sink key."""

from __future__ import annotations

from expectations.columns import Columns
from expectations.sql import VALIDATED, keys_with_distinct_rows
from expectations.suites import LockstepExpectation, SuiteSpec


class ExpectNoPrimaryKeyViolations(LockstepExpectation):
    description: str = (
        "The upsert materializer holds at most one distinct live row per sink "
        "primary key: two would mean the key is not unique in the query's result."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return keys_with_distinct_rows(cols, VALIDATED)


def materializer_suite(cols: Columns) -> SuiteSpec:
    return SuiteSpec("materializer", "materializer_state", (ExpectNoPrimaryKeyViolations.build(cols),))
