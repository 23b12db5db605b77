"""unity: on the stream's result table, the same rows as the batch result, key by key."""

from __future__ import annotations

import great_expectations.expectations as gxe

from expectations.columns import Columns
from expectations.sql import BATCH_VIEW, VALIDATED, all_equal, duplicate_keys, key_match, select_list
from expectations.suites import LockstepExpectation, SuiteSpec

MISMATCH_SUFFIXES = ("__stream", "__batch")  # a mismatched row's value column, per side


class ExpectSinkKeyUnique(LockstepExpectation):
    description: str = "The stream result has at most one row per sink primary key."

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return duplicate_keys(cols, VALIDATED)


class ExpectNoRowsMissingFromStream(LockstepExpectation):
    description: str = "Every row of the batch result has a row with its key in the stream result."

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return f"SELECT b.* FROM {BATCH_VIEW} b LEFT ANTI JOIN {VALIDATED} s ON {key_match(cols.key, 'b', 's')}"


class ExpectNoExtraRowsInStream(LockstepExpectation):
    description: str = "Every row of the stream result has a row with its key in the batch result."

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return f"SELECT s.* FROM {VALIDATED} s LEFT ANTI JOIN {BATCH_VIEW} b ON {key_match(cols.key, 's', 'b')}"


class ExpectNoMismatchedValues(LockstepExpectation):
    description: str = (
        "Rows with the same key in the stream and batch results have equal values "
        "(floating columns within the configured tolerance)."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        in_stream, in_batch = MISMATCH_SUFFIXES
        sides = ", ".join(f"s.`{v}` AS `{v + in_stream}`, b.`{v}` AS `{v + in_batch}`" for v in cols.values)
        key = select_list(cols.key, "s")
        head = f"{key}, " if key else ""
        return (
            f"SELECT {head}{sides} FROM {VALIDATED} s JOIN {BATCH_VIEW} b "
            f"ON {key_match(cols.key, 's', 'b')} WHERE NOT ({all_equal(cols)})"
        )


# Which expectation's unexpected rows count as which kind of difference in the report.
DIFFERENCES = {
    "missing_rows": ExpectNoRowsMissingFromStream,
    "extra_rows": ExpectNoExtraRowsInStream,
    "mismatched_rows": ExpectNoMismatchedValues,
}


def unity_suite(cols: Columns, batch_columns: list[str]) -> SuiteSpec:
    found = [
        gxe.ExpectTableColumnsToMatchOrderedList(column_list=batch_columns),
        gxe.ExpectTableRowCountToEqual(value={"$PARAMETER": "batch_rows"}),
        ExpectSinkKeyUnique.build(cols),
        ExpectNoRowsMissingFromStream.build(cols),
        ExpectNoExtraRowsInStream.build(cols),
    ]
    if cols.values:
        found.append(ExpectNoMismatchedValues.build(cols))
    return SuiteSpec("unity", "stream_result", tuple(found))
