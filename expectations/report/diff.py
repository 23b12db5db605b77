"""The differences section: samples of missing, extra and mismatched rows.

Mismatched rows are shown side by side (key, then each value column as stream | batch) with the
differing cells marked, as chispa prints two frames: the eye goes straight to what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from expectations.report.tables import Table, cell, rows_table


@dataclass(frozen=True)
class Pair:
    stream: str
    batch: str
    differs: bool


@dataclass(frozen=True)
class Mismatch:
    key: list[str]
    pairs: list[Pair]


@dataclass(frozen=True)
class SideBySide:
    key: list[str]
    values: list[str]
    rows: list[Mismatch]


@dataclass(frozen=True)
class Differences:
    missing: Table
    extra: Table
    mismatched: SideBySide


def differences(report: dict) -> Differences | None:
    """None for reports written before samples of differing rows were kept."""
    found = report.get("differences")
    if not isinstance(found, dict):
        return None
    key, values = list(found.get("key") or []), list(found.get("values") or [])
    return Differences(
        rows_table(found.get("missing") or [], key, values),
        rows_table(found.get("extra") or [], key, values),
        side_by_side(found.get("mismatched") or [], key, values),
    )


def side_by_side(mismatched: list[dict], key: list[str], values: list[str]) -> SideBySide:
    key = key or list(dict.fromkeys(name for row in mismatched for name in row.get("key") or {}))
    values = list(
        dict.fromkeys(
            [*values, *(name for row in mismatched for side in ("stream", "batch") for name in row.get(side) or {})]
        )
    )
    return SideBySide(key, values, [_mismatch(row, key, values) for row in mismatched])


def _mismatch(row: dict, key: list[str], values: list[str]) -> Mismatch:
    stream, batch = row.get("stream") or {}, row.get("batch") or {}
    # The check names the differing columns (it knows the float tolerance); without that list,
    # any inequality counts.
    differing = row.get("differing")
    marked = set(differing) if differing is not None else {v for v in values if stream.get(v) != batch.get(v)}
    return Mismatch(
        [cell((row.get("key") or {}).get(name)) for name in key],
        [Pair(cell(stream.get(v)), cell(batch.get(v)), v in marked) for v in values],
    )
