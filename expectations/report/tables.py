"""Rows (lists of dicts from report.json) as tables of display strings.

Values are formatted here and escaped by the template: a cell never carries markup.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    key_columns: int = 0  # the first columns identify the row: drawn apart from the values


def rows_table(rows: list[dict], key: Sequence[str] = (), values: Sequence[str] = ()) -> Table:
    """Key columns, then value columns, then any other field a row has (in order of appearance)."""
    columns = list(dict.fromkeys([*key, *values, *(name for row in rows for name in row)]))
    return Table(columns, [[cell(row.get(name)) for name in columns] for row in rows], len(key))


def figure(value) -> str:
    """A count or measure shown on its own: thousands separated, absent as a dash."""
    if value is None:
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return cell(value)


def cell(value) -> str:
    """How one value reads: null, true/false and "" spelled out so they are not mistaken for text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)
