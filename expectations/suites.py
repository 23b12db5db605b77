"""The suites of a check, each on the data it validates.

    unity         on the stream's result table: same rows as the batch result, key by key
    batch_result  on the batch result: one row per key (so comparing by key is comparing rows)
    retraction    on the sink's change data feed: every retraction retracts what was emitted
    windows       windowed queries, on the stream result: final windows end before the
                  watermark; windows without late events agree with batch
    state         on Spark's aggregation state: no group counted below zero or left empty
    materializer  on the upsert materializer's state: one distinct live row per sink key
"""

from __future__ import annotations

from dataclasses import dataclass

import great_expectations.expectations as gxe

from expectations import custom, queries
from expectations.queries import Columns


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    asset: str
    expectations: tuple


def unity_suite(cols: Columns, batch_columns: list[str]) -> SuiteSpec:
    found = [
        gxe.ExpectTableColumnsToMatchOrderedList(column_list=batch_columns),
        gxe.ExpectTableRowCountToEqual(value={"$PARAMETER": "batch_rows"}),
        custom.ExpectSinkKeyUnique(unexpected_rows_query=queries.duplicate_keys(cols)),
        custom.ExpectNoRowsMissingFromStream(unexpected_rows_query=queries.missing_rows(cols)),
        custom.ExpectNoExtraRowsInStream(unexpected_rows_query=queries.extra_rows(cols)),
    ]
    if cols.values:
        found.append(custom.ExpectNoMismatchedValues(unexpected_rows_query=queries.mismatched_rows(cols)))
    return SuiteSpec("unity", "stream_result", tuple(found))


def batch_suite(cols: Columns) -> SuiteSpec:
    return SuiteSpec("batch_result", "batch_result",
                     (custom.ExpectBatchKeyUnique(unexpected_rows_query=queries.duplicate_keys(cols)),))


def retraction_suite(cols: Columns, final_windows: bool = False) -> SuiteSpec:
    final = ((custom.ExpectFinalWindowRowsNeverChange(
        unexpected_rows_query=queries.window_rows_changed(cols)),) if final_windows else ())
    return SuiteSpec("retraction", "change_feed", final + (
        custom.ExpectNoGhostRetractions(unexpected_rows_query=queries.ghost_retractions(cols)),
        custom.ExpectRetractionsMatchLastImage(
            unexpected_rows_query=queries.retraction_image_mismatch(cols)),
        custom.ExpectNoInsertOverLiveRow(unexpected_rows_query=queries.insert_over_live_row(cols)),
        custom.ExpectUpdatesInPairs(unexpected_rows_query=queries.unpaired_updates(cols)),
        custom.ExpectChangeFeedReplaysToTable(
            unexpected_rows_query=queries.replay_differs_from_table(cols)),
    ))


def windows_suite(cols: Columns, final: bool, window_end_sql: str, watermark: int | None,
                  window_column: tuple[str, str]) -> SuiteSpec:
    found = []
    if final:
        found.append(custom.ExpectNoWindowEndAfterWatermark(
            unexpected_rows_query=queries.windows_after_watermark(window_end_sql, watermark)))
    found.append(custom.ExpectWindowsWithoutLateEventsAgree(
        unexpected_rows_query=queries.differences_outside_late_windows(cols, window_column)))
    return SuiteSpec("windows", "stream_result", tuple(found))


def state_suite(group_keys: tuple[str, ...], sink_key: tuple[str, ...], has_slots: bool,
                is_global: bool) -> SuiteSpec:
    found = [custom.ExpectNoNegativeGroupCounts(
        unexpected_rows_query=queries.negative_counts(group_keys, has_slots))]
    if not is_global:
        found.append(custom.ExpectNoEmptyGroupInSink(
            unexpected_rows_query=queries.empty_groups_in_sink(group_keys, sink_key, has_slots)))
    return SuiteSpec("state", "stream_state", tuple(found))


def materializer_suite(cols: Columns) -> SuiteSpec:
    return SuiteSpec("materializer", "materializer_state", (
        custom.ExpectNoPrimaryKeyViolations(unexpected_rows_query=queries.primary_key_violations(cols)),))
