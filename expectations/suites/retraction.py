"""retraction: on the sink's change data feed (up to the consistency point), every retraction
retracts what was emitted.

The rules validate the feed with, per key, the previous and next change in commit order (a
commit's retractions before its additions): ordered_feed() computes that once, and each rule is a
filter over it.
"""

from __future__ import annotations

from expectations.columns import Columns
from expectations.sql import STREAM_VIEW, VALIDATED, select_list
from expectations.suites import LockstepExpectation, SuiteSpec
from jobs.changelog.kinds import CDF_RETRACTIONS

RETRACTIONS = "(" + ", ".join(f"'{name}'" for name in CDF_RETRACTIONS) + ")"
N = "__lockstep_copies"  # a row's copies replayed less its copies in the table
ADDITIONS = "('insert', 'update_postimage')"


def ordered_feed(cols: Columns, feed_view: str) -> str:
    image = "named_struct(" + ", ".join(f"'{c}', `{c}`" for c in cols.all) + ")"
    partition = f"PARTITION BY {select_list(cols.key)} " if cols.key else ""
    return (
        f"SELECT *, LAG(_change_type) OVER w AS __prev_type, LAG(__image) OVER w AS __prev_image, "
        f"LAG(_commit_version) OVER w AS __prev_version, LEAD(_change_type) OVER w AS __next_type "
        f"FROM (SELECT *, {image} AS __image, CASE WHEN _change_type IN {RETRACTIONS} THEN 0 "
        f"ELSE 1 END AS __rank FROM {feed_view}) "
        f"WINDOW w AS ({partition}ORDER BY _commit_version, __rank)"
    )


def _feed_rows(cols: Columns, condition: str) -> str:
    return f"SELECT {select_list(cols.all)}, _change_type, _commit_version FROM {VALIDATED} WHERE {condition}"


class ExpectNoGhostRetractions(LockstepExpectation):
    description: str = (
        "Every update_preimage (-U) and delete (-D) retracts a row that is live at "
        "that point of the change feed: nothing retracts a row never emitted."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return _feed_rows(cols, f"__rank = 0 AND (__prev_type IS NULL OR __prev_type IN {RETRACTIONS})")


class ExpectRetractionsMatchLastImage(LockstepExpectation):
    description: str = "Every update_preimage (-U) and delete (-D) carries exactly the image last emitted for its key."

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return _feed_rows(cols, f"__rank = 0 AND __prev_type IN {ADDITIONS} AND NOT (__prev_image <=> __image)")


class ExpectNoInsertOverLiveRow(LockstepExpectation):
    description: str = "An insert (+I) only adds a key that is not live (no duplicate emission)."

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return _feed_rows(cols, f"_change_type = 'insert' AND __prev_type IN {ADDITIONS}")


class ExpectUpdatesInPairs(LockstepExpectation):
    description: str = (
        "Every update_postimage (+U) directly follows the update_preimage (-U) of its "
        "key in the same commit, and every -U is followed by its +U."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return _feed_rows(
            cols,
            "(_change_type = 'update_postimage' AND (__prev_type IS NULL OR "
            "__prev_type <> 'update_preimage' OR __prev_version <> _commit_version)) OR "
            "(_change_type = 'update_preimage' AND (__next_type IS NULL OR "
            "__next_type <> 'update_postimage'))",
        )


class ExpectChangeFeedReplaysToTable(LockstepExpectation):
    description: str = (
        "Replaying the change feed from the first commit gives exactly the sink table: no ghost rows, nothing lost."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        """A key's last change, if an addition, is its live row: that must be exactly the table.
        Both sides' rows counted in one aggregation (+1 replayed, -1 in the table), each copy of
        a row that does not cancel out listed under its side: what EXCEPT ALL both ways gives,
        at the cost of one of them (Spark runs each EXCEPT ALL as such an aggregation)."""
        columns = select_list(cols.all)
        replayed = (
            f"SELECT {columns}, 1 AS {N} FROM {VALIDATED} WHERE __next_type IS NULL AND _change_type IN {ADDITIONS}"
        )
        table = f"SELECT {columns}, -1 AS {N} FROM {STREAM_VIEW}"
        counted = (
            f"SELECT {columns}, SUM({N}) AS {N} FROM ({replayed} UNION ALL {table}) GROUP BY {columns} "
            f"HAVING SUM({N}) <> 0"
        )
        side = f"CASE WHEN {N} > 0 THEN 'only in the replayed change feed' ELSE 'only in the sink table' END"
        return (
            f"SELECT {side} AS side, {columns} FROM ({counted}) LATERAL VIEW explode(sequence(1, abs({N}))) c AS __copy"
        )


class ExpectNoWindowEndAfterWatermark(LockstepExpectation):
    description: str = (
        "emit: final: no window was emitted before the watermark passed its end (the "
        "final watermark, or the end of a bounded input)."
    )

    @classmethod
    def rows_query(cls, cols: Columns, window_end_sql: str, watermark_micros: int | None) -> str:
        limit = "NULL" if watermark_micros is None else str(watermark_micros)
        return (
            f"SELECT {select_list(cols.all)}, {window_end_sql} AS window_end_at FROM {VALIDATED} "
            f"WHERE _change_type = 'insert' AND ({limit} IS NULL OR unix_micros({window_end_sql}) > {limit})"
        )


class ExpectFinalWindowRowsNeverChange(LockstepExpectation):
    description: str = (
        "emit: final: a window's row is inserted once, when the watermark passes its "
        "end, and never updated or deleted afterwards (the change feed holds inserts only)."
    )

    @classmethod
    def rows_query(cls, cols: Columns) -> str:
        return _feed_rows(cols, "_change_type <> 'insert'")


def retraction_suite(cols: Columns, final_windows: tuple[str | None, int | None] | None = None) -> SuiteSpec:
    """final_windows: (the window end as SQL, the final watermark) of an emit: final query; the
    end is None for a session whose end the query does not select."""
    final: tuple[LockstepExpectation, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    if final_windows:
        end_sql, watermark = final_windows
        final = (ExpectFinalWindowRowsNeverChange.build(cols),)
        if end_sql is None:
            skipped = (
                (
                    ExpectNoWindowEndAfterWatermark.expectation_type,
                    "the query does not select session_window.end, and a session's end is not its start plus a size",
                ),
            )
        else:
            final += (ExpectNoWindowEndAfterWatermark.build(cols, end_sql, watermark),)
    rules = (
        ExpectNoGhostRetractions,
        ExpectRetractionsMatchLastImage,
        ExpectNoInsertOverLiveRow,
        ExpectUpdatesInPairs,
        ExpectChangeFeedReplaysToTable,
    )
    return SuiteSpec("retraction", "change_feed", final + tuple(rule.build(cols) for rule in rules), skipped)
