"""windows (windowed queries), on the stream result: with emit: final no emitted window ends
after the final watermark; every window that received no late event agrees with batch."""

from __future__ import annotations

from expectations.columns import Columns
from expectations.sql import BATCH_VIEW, LATE_WINDOWS_VIEW, VALIDATED, differing_rows
from expectations.suites import LockstepExpectation, SuiteSpec


class ExpectNoWindowEndAfterWatermark(LockstepExpectation):
    description: str = "emit: final: no emitted window ends after the final watermark."

    @classmethod
    def rows_query(cls, window_end_sql: str, watermark_micros: int | None) -> str:
        limit = "NULL" if watermark_micros is None else str(watermark_micros)
        return (f"SELECT *, {window_end_sql} AS window_end_at FROM {VALIDATED} "
                f"WHERE {limit} IS NULL OR unix_micros({window_end_sql}) > {limit}")


class ExpectWindowsWithoutLateEventsAgree(LockstepExpectation):
    description: str = ("Every window that received no late event has the same rows in the stream and "
                        "the batch result: a difference there is not explained by lateness.")

    @classmethod
    def rows_query(cls, cols: Columns, window_column: tuple[str, str]) -> str:
        """Differing keys whose window received no late event: late events cannot explain those."""
        column, field = window_column
        return (f"SELECT * FROM ({differing_rows(cols, VALIDATED, BATCH_VIEW)}) d "
                f"WHERE NOT EXISTS (SELECT 1 FROM {LATE_WINDOWS_VIEW} l WHERE l.{field} = d.`{column}`)")


def windows_suite(cols: Columns, final: bool, window_end_sql: str, watermark: int | None,
                  window_column: tuple[str, str]) -> SuiteSpec:
    found = [ExpectNoWindowEndAfterWatermark.build(window_end_sql, watermark)] if final else []
    found.append(ExpectWindowsWithoutLateEventsAgree.build(cols, window_column))
    return SuiteSpec("windows", "stream_result", tuple(found))
