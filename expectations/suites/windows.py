"""windows (windowed queries), on the stream result (with emit: final, the sink and the windows
still open): every window that received no late event agrees with batch. The rules on what a
final window emits are the change feed's: ExpectNoWindowEndAfterWatermark and
ExpectFinalWindowRowsNeverChange, in the retraction suite."""

from __future__ import annotations

from expectations.columns import Columns
from expectations.sql import BATCH_VIEW, LATE_WINDOWS_VIEW, VALIDATED, differing_rows
from expectations.suites import LockstepExpectation, SuiteSpec


class ExpectWindowsWithoutLateEventsAgree(LockstepExpectation):
    description: str = (
        "Every window that received no late event has the same rows in the stream and "
        "the batch result: a difference there is not explained by lateness."
    )

    @classmethod
    def rows_query(cls, cols: Columns, window_column: tuple[str, str]) -> str:
        """Differing keys whose window received no late event: late events cannot explain those."""
        column, field = window_column
        return (
            f"SELECT * FROM ({differing_rows(cols, VALIDATED, BATCH_VIEW)}) d "
            f"WHERE NOT EXISTS (SELECT 1 FROM {LATE_WINDOWS_VIEW} l WHERE l.{field} = d.`{column}`)"
        )


def windows_suite(cols: Columns, window_column: tuple[str, str]) -> SuiteSpec:
    return SuiteSpec("windows", "stream_result", (ExpectWindowsWithoutLateEventsAgree.build(cols, window_column),))
