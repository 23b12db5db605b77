"""The MERGE both writers run, as SQL snippets over target `t` and source `s` (delta-rs and Spark
read the same syntax). Keys match with IS NOT DISTINCT FROM, so a NULL key is a key like any other."""

from __future__ import annotations

from jobs.changelog.columns import COUNT, DELETE, OP, UPSERT

IS_DELETE = f"s.{OP} = '{DELETE}'"
IS_UPSERT = f"s.{OP} = '{UPSERT}'"
# A multiset (retract) table: the copies after the merge.
COPIES = f"t.`{COUNT}` + s.`{COUNT}`"
GAINS_COPIES = f"s.`{COUNT}` > 0"


def key_matches(key: tuple[str, ...]) -> str:
    if not key:
        return "true"  # a global aggregate: one row, matched by every change
    return " AND ".join(f"(t.`{k}` IS NOT DISTINCT FROM s.`{k}`)" for k in key)


def value_changes(values: list[str]) -> str:
    """An upsert that changes nothing is not written, so the change feed never holds a -U/+U pair
    with equal images."""
    return f"{IS_UPSERT} AND ({values_differ(values)})"


def values_differ(values: list[str]) -> str:
    return " OR ".join(f"(t.`{v}` IS DISTINCT FROM s.`{v}`)" for v in values)


def from_source(columns: list[str]) -> dict[str, str]:
    return {f"`{c}`": f"s.`{c}`" for c in columns}


def values_of(columns: list[str], key: tuple[str, ...]) -> list[str]:
    return [c for c in columns if c != OP and c not in key]


def written_columns(columns: list[str]) -> list[str]:
    return [c for c in columns if c != OP]
