"""SQL pieces the expectations, the diagnosis and the window figures share.

Great Expectations runs an expectation's query with the data it validates as {batch}: VALIDATED
names that placeholder, so a query says which side it reads (the stream result, the change feed,
the batch result) by the views below, registered by check.py. Keys compare with <=> (NULL equals
NULL: a NULL group key is a real group).
"""

from __future__ import annotations

from expectations.columns import Columns

VALIDATED = "{batch}"  # GX's placeholder for the data under validation (not lockstep's batch job)

BATCH_VIEW = "lockstep_batch_result"
STREAM_VIEW = "lockstep_stream_table"  # the sink at the point
STREAM_COMPARED_VIEW = "lockstep_stream_compared"  # the sink and, with emit: final, the windows still open
FEED_VIEW = "lockstep_change_feed"
LATE_WINDOWS_VIEW = "lockstep_late_windows"
MATERIALIZER_VIEW = "lockstep_materializer_state"


def q(name: str) -> str:
    return f"`{name}`"


def select_list(columns, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{q(c)}" for c in columns)


def key_match(key, left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} <=> {right}.{q(k)}" for k in key) or "TRUE"


def all_equal(cols: Columns, left: str = "s", right: str = "b") -> str:
    return " AND ".join(cols.equal_sql(v, left, right) for v in cols.values) or "TRUE"


def differing_rows(cols: Columns, stream: str, batch: str) -> str:
    """Keys missing on either side or with different values: one row per differing key."""
    keys = ", ".join(f"COALESCE(s.{q(k)}, b.{q(k)}) AS {q(k)}" for k in cols.key)
    head = f"{keys}, " if keys else ""
    return (
        f"SELECT {head}CASE WHEN s.__in IS NULL THEN 'missing from the stream' "
        f"WHEN b.__in IS NULL THEN 'extra in the stream' ELSE 'different values' END AS difference "
        f"FROM (SELECT *, TRUE AS __in FROM {stream}) s FULL OUTER JOIN "
        f"(SELECT *, TRUE AS __in FROM {batch}) b ON {key_match(cols.key, 's', 'b')} "
        f"WHERE s.__in IS NULL OR b.__in IS NULL OR NOT ({all_equal(cols)})"
    )


def duplicate_keys(cols: Columns, table: str) -> str:
    """Keys with more than one row in `table`."""
    key = select_list(cols.key)
    group = f" GROUP BY {key}" if key else ""
    head = f"{key}, " if key else ""
    return f"SELECT {head}COUNT(*) AS copies FROM {table}{group} HAVING COUNT(*) > 1"


def keys_with_distinct_rows(cols: Columns, table: str) -> str:
    """Sink keys holding two or more distinct rows in `table`."""
    key = select_list(cols.key)
    return (
        f"SELECT {key}, COUNT(*) AS distinct_live_rows FROM (SELECT DISTINCT {select_list(cols.all)} "
        f"FROM {table}) GROUP BY {key} HAVING COUNT(*) > 1"
    )
