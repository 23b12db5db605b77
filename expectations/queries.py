"""The SQL behind each expectation. Every query returns the rows that break its rule.

{batch} is the data GX validates; the other side is a temporary view registered by check.py.
Keys compare with <=> (NULL equals NULL: a NULL group key is a real group).
"""

from __future__ import annotations

from dataclasses import dataclass

BATCH_VIEW = "lockstep_batch_result"
STREAM_VIEW = "lockstep_stream_table"
FEED_VIEW = "lockstep_change_feed"
LATE_WINDOWS_VIEW = "lockstep_late_windows"
RETRACTIONS = "('update_preimage', 'delete')"
ADDITIONS = "('insert', 'update_postimage')"
MISMATCH_SUFFIXES = ("__stream", "__batch")  # a mismatched row's value column, per side


@dataclass(frozen=True)
class Columns:
    """The sink's columns: its primary key, the other columns, and which of those are floating."""

    key: tuple[str, ...]
    values: tuple[str, ...]
    floating: frozenset[str]
    abs_tol: float
    rel_tol: float

    @property
    def all(self) -> tuple[str, ...]:
        return self.key + self.values


def q(name: str) -> str:
    return f"`{name}`"


def _select(columns, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{q(c)}" for c in columns)


def _key_match(key, left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} <=> {right}.{q(k)}" for k in key) or "TRUE"


# -- unity -------------------------------------------------------------------------------------

def missing_rows(cols: Columns, stream: str = "{batch}", batch: str = BATCH_VIEW) -> str:
    return (f"SELECT b.* FROM {batch} b LEFT ANTI JOIN {stream} s "
            f"ON {_key_match(cols.key, 'b', 's')}")


def extra_rows(cols: Columns, stream: str = "{batch}", batch: str = BATCH_VIEW) -> str:
    return (f"SELECT s.* FROM {stream} s LEFT ANTI JOIN {batch} b "
            f"ON {_key_match(cols.key, 's', 'b')}")


def mismatched_rows(cols: Columns, stream: str = "{batch}", batch: str = BATCH_VIEW) -> str:
    in_stream, in_batch = MISMATCH_SUFFIXES
    sides = ", ".join(f"s.{q(v)} AS {q(v + in_stream)}, b.{q(v)} AS {q(v + in_batch)}" for v in cols.values)
    key = _select(cols.key, "s")
    head = f"{key}, " if key else ""
    return (f"SELECT {head}{sides} FROM {stream} s JOIN {batch} b "
            f"ON {_key_match(cols.key, 's', 'b')} WHERE NOT ({_all_equal(cols)})")


def _all_equal(cols: Columns) -> str:
    return " AND ".join(_equal(v, cols) for v in cols.values) or "TRUE"


def differing_rows(cols: Columns, stream: str, batch: str) -> str:
    """Keys missing on either side or with different values: one row per differing key."""
    keys = ", ".join(f"COALESCE(s.{q(k)}, b.{q(k)}) AS {q(k)}" for k in cols.key)
    head = f"{keys}, " if keys else ""
    return (f"SELECT {head}CASE WHEN s.__in IS NULL THEN 'missing from the stream' "
            f"WHEN b.__in IS NULL THEN 'extra in the stream' ELSE 'different values' END AS difference "
            f"FROM (SELECT *, TRUE AS __in FROM {stream}) s FULL OUTER JOIN "
            f"(SELECT *, TRUE AS __in FROM {batch}) b ON {_key_match(cols.key, 's', 'b')} "
            f"WHERE s.__in IS NULL OR b.__in IS NULL OR NOT ({_all_equal(cols)})")


def _equal(column: str, cols: Columns) -> str:
    s, b = f"s.{q(column)}", f"b.{q(column)}"
    if column not in cols.floating:
        return f"({s} <=> {b})"
    tolerance = f"{cols.abs_tol!r} + {cols.rel_tol!r} * GREATEST(ABS({s}), ABS({b}))"
    return f"(({s} <=> {b}) OR COALESCE(ABS({s} - {b}) <= {tolerance}, FALSE))"


def duplicate_keys(cols: Columns, table: str = "{batch}") -> str:
    key = _select(cols.key)
    group = f" GROUP BY {key}" if key else ""
    head = f"{key}, " if key else ""
    return f"SELECT {head}COUNT(*) AS copies FROM {table}{group} HAVING COUNT(*) > 1"


def primary_key_violations(cols: Columns, table: str = "{batch}") -> str:
    """Sink keys with two or more distinct live rows in the materializer's state."""
    key = _select(cols.key)
    return (f"SELECT {key}, COUNT(*) AS distinct_live_rows FROM (SELECT DISTINCT {_select(cols.all)} "
            f"FROM {table}) GROUP BY {key} HAVING COUNT(*) > 1")


# -- the change feed ---------------------------------------------------------------------------
# The retraction rules validate the change feed with, per key, the previous and next change in
# commit order (a commit's retractions before its additions): ordered_feed() computes that once,
# and each rule is a filter over it.

def ordered_feed(cols: Columns, feed_view: str) -> str:
    image = "named_struct(" + ", ".join(f"'{c}', {q(c)}" for c in cols.all) + ")"
    partition = f"PARTITION BY {_select(cols.key)} " if cols.key else ""
    return (f"SELECT *, LAG(_change_type) OVER w AS __prev_type, LAG(__image) OVER w AS __prev_image, "
            f"LAG(_commit_version) OVER w AS __prev_version, LEAD(_change_type) OVER w AS __next_type "
            f"FROM (SELECT *, {image} AS __image, CASE WHEN _change_type IN {RETRACTIONS} THEN 0 "
            f"ELSE 1 END AS __rank FROM {feed_view}) "
            f"WINDOW w AS ({partition}ORDER BY _commit_version, __rank)")


def _feed_rows(cols: Columns, condition: str) -> str:
    return f"SELECT {_select(cols.all)}, _change_type, _commit_version FROM {{batch}} WHERE {condition}"


def ghost_retractions(cols: Columns) -> str:
    return _feed_rows(cols, f"__rank = 0 AND (__prev_type IS NULL OR __prev_type IN {RETRACTIONS})")


def retraction_image_mismatch(cols: Columns) -> str:
    return _feed_rows(cols, f"__rank = 0 AND __prev_type IN {ADDITIONS} AND NOT (__prev_image <=> __image)")


def insert_over_live_row(cols: Columns) -> str:
    return _feed_rows(cols, f"_change_type = 'insert' AND __prev_type IN {ADDITIONS}")


def unpaired_updates(cols: Columns) -> str:
    return _feed_rows(cols, "(_change_type = 'update_postimage' AND (__prev_type IS NULL OR "
                            "__prev_type <> 'update_preimage' OR __prev_version <> _commit_version)) OR "
                            "(_change_type = 'update_preimage' AND (__next_type IS NULL OR "
                            "__next_type <> 'update_postimage'))")


def replay_differs_from_table(cols: Columns) -> str:
    """A key's last change, if an addition, is its live row: that must be exactly the table."""
    replayed = (f"SELECT {_select(cols.all)} FROM {{batch}} "
                f"WHERE __next_type IS NULL AND _change_type IN {ADDITIONS}")
    table = f"SELECT {_select(cols.all)} FROM {STREAM_VIEW}"
    return (f"SELECT 'only in the replayed change feed' AS side, * FROM ({replayed} EXCEPT ALL {table}) "
            f"UNION ALL SELECT 'only in the sink table' AS side, * FROM ({table} EXCEPT ALL {replayed})")


# -- windows -------------------------------------------------------------------------------------

def window_rows_changed(cols: Columns) -> str:
    """emit: final: a window's row is inserted once and never updated or deleted."""
    return _feed_rows(cols, "_change_type <> 'insert'")


def windows_after_watermark(window_end_sql: str, watermark_micros: int | None) -> str:
    limit = "NULL" if watermark_micros is None else str(watermark_micros)
    return (f"SELECT *, {window_end_sql} AS window_end_at FROM {{batch}} "
            f"WHERE {limit} IS NULL OR unix_micros({window_end_sql}) > {limit}")


def differences_outside_late_windows(cols: Columns, window_column: tuple[str, str]) -> str:
    """Differing keys whose window received no late event: late events cannot explain those."""
    column, field = window_column
    return (f"SELECT * FROM ({differing_rows(cols, '{batch}', BATCH_VIEW)}) d "
            f"WHERE NOT EXISTS (SELECT 1 FROM {LATE_WINDOWS_VIEW} l WHERE l.{field} = d.{q(column)})")


# -- aggregate state -----------------------------------------------------------------------------

def negative_counts(group_keys: tuple[str, ...], has_slots: bool) -> str:
    slot = " AND key.__slot = 0" if has_slots else ""
    keys = ", ".join(f"key.{q(k)} AS {q(k)}" for k in group_keys)
    head = f"{keys}, " if keys else ""
    return f"SELECT {head}value.__count AS live_rows FROM {{batch}} WHERE value.__count < 0{slot}"


def empty_groups_in_sink(group_keys: tuple[str, ...], sink_key: tuple[str, ...], has_slots: bool) -> str:
    slot = " AND st.key.__slot = 0" if has_slots else ""
    match = " AND ".join(f"st.key.{q(g)} <=> t.{q(k)}" for g, k in zip(group_keys, sink_key))
    return (f"SELECT t.* FROM {{batch}} st JOIN {STREAM_VIEW} t ON {match} "
            f"WHERE st.value.__count = 0{slot}")
