"""Shrink a failing case: fewer changelog rows and a shorter query that still fail the same way.

Rows are removed a key's history at a time (every change of one primary key, or of one row
image in a source without a key), so what is left is still a valid changelog; then the query loses
select items one at a time. A candidate is kept when it fails with the same kind of finding
(Finding.kind). Each step asks Flink and runs lockstep again, so shrinking stops after a budget.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable

from tests.differential.case import Case, Source
from tests.differential.compare import Finding

Check = Callable[[Case], Finding]


def shrink(case: Case, finding: Finding, check: Check, seconds: float = 600) -> tuple[Case, Finding]:
    deadline = time.monotonic() + seconds
    best, best_finding = case, finding
    for candidates in (_fewer_histories, _shorter_select):
        progress = True
        while progress and time.monotonic() < deadline:
            progress = False
            for candidate in candidates(best):
                if time.monotonic() >= deadline:
                    break
                found = check(candidate)
                if not found.passed and found.kind == finding.kind:
                    best, best_finding, progress = candidate, found, True
                    break
    return best, best_finding


def _fewer_histories(case: Case):
    """Cases with one chunk of key histories removed from one source: halves, then quarters, ...
    None for a case with late changes: without some rows, the watermark would judge them anew."""
    if any(source.late for source in case.sources):
        return
    for index, source in enumerate(case.sources):
        histories = _histories(source)
        chunk = len(histories) // 2
        while chunk >= 1:
            for start in range(0, len(histories), chunk):
                dropped = {key for key in histories[start : start + chunk]}
                kept = [row for row in source.rows if _history_key(source, row) not in dropped]
                if len(kept) < len(source.rows):
                    yield _with_rows(case, index, kept)
            chunk //= 2


def _histories(source: Source) -> list:
    return list(dict.fromkeys(_history_key(source, row) for row in source.rows))


def _history_key(source: Source, row: list):
    if source.primary_key:
        position = 1 + [c.name for c in source.columns].index(source.primary_key[0])
        return row[position]
    return tuple(row[1:])


def _with_rows(case: Case, index: int, rows: list[list]) -> Case:
    smaller = copy.deepcopy(case)
    smaller.sources[index].rows = rows
    smaller.rows_per_batch = max(1, min(smaller.rows_per_batch, smaller.size))
    return smaller


def _shorter_select(case: Case):
    """Cases whose outermost SELECT lost one item (both dialects alike)."""
    spark_items, flink_items = _select_items(case.spark_sql), _select_items(case.flink_sql)
    if spark_items is None or flink_items is None or len(spark_items) != len(flink_items):
        return
    for i in range(len(spark_items)):
        if len(spark_items) <= 1:
            return
        smaller = copy.deepcopy(case)
        smaller.spark_sql = _without_item(case.spark_sql, spark_items, i)
        smaller.flink_sql = _without_item(case.flink_sql, flink_items, i)
        yield smaller


def _select_items(sql: str) -> list[str] | None:
    """The outermost SELECT's items, split at top-level commas."""
    match = re.match(r"SELECT (.*?) FROM ", sql)
    if match is None:
        return None
    items, depth, current = [], 0, ""
    for char in match.group(1):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return items + [current.strip()]


def _without_item(sql: str, items: list[str], index: int) -> str:
    head = "SELECT " + ", ".join(items) + " FROM "
    rest = [item for i, item in enumerate(items) if i != index]
    return sql.replace(head, "SELECT " + ", ".join(rest) + " FROM ", 1)
