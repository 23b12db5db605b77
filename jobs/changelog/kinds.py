"""Row kinds (Flink's +I, -U, +U, -D), their weights, and changelog modes such as [I,UB,UA,D].

A change row carries a weight: +I and +U add the row (+1), -U and -D take it away (-1). A table is
the multiset of rows whose weights sum to a positive count. Everything downstream leans on this:
filters and projections keep weights, invertible aggregates sum them.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class RowKind(IntEnum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def mode_letter(self) -> str:
        return _MODE_LETTER[self]

    @property
    def weight(self) -> int:
        return -1 if self in (RowKind.UPDATE_BEFORE, RowKind.DELETE) else 1

    @property
    def is_retraction(self) -> bool:
        return self.weight < 0

    @classmethod
    def from_short(cls, text: str) -> RowKind:
        return _BY_SHORT[text]


_SHORT = {RowKind.INSERT: "+I", RowKind.UPDATE_BEFORE: "-U", RowKind.UPDATE_AFTER: "+U", RowKind.DELETE: "-D"}
_BY_SHORT = {short: kind for kind, short in _SHORT.items()}
_MODE_LETTER = {RowKind.INSERT: "I", RowKind.UPDATE_BEFORE: "UB", RowKind.UPDATE_AFTER: "UA", RowKind.DELETE: "D"}
SHORT_NAMES = tuple(_SHORT[kind] for kind in RowKind)

# The Delta change data feed is the retract encoding of the output changelog.
CDF_CHANGE_TYPES = {
    "insert": RowKind.INSERT,
    "update_preimage": RowKind.UPDATE_BEFORE,
    "update_postimage": RowKind.UPDATE_AFTER,
    "delete": RowKind.DELETE,
}
CDF_RETRACTIONS = tuple(name for name, kind in CDF_CHANGE_TYPES.items() if kind.is_retraction)


class ChangelogMode(frozenset):
    """A set of row kinds, printed in Flink's notation: [I], [I,UA,D], [I,UB,UA,D]."""

    def __str__(self) -> str:
        return "[" + ",".join(kind.mode_letter for kind in sorted(self)) + "]"

    __repr__ = __str__


INSERT_ONLY = ChangelogMode({RowKind.INSERT})
UPSERT = ChangelogMode({RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE})
ALL_KINDS = ChangelogMode(RowKind)


def weights_of(kinds) -> np.ndarray:
    """The weight of each row kind of an Arrow (or numpy) array of kinds, as int64: -1 for -U
    and -D, +1 for +I and +U."""
    values = kinds.to_numpy() if hasattr(kinds, "to_numpy") else np.asarray(kinds)
    return np.where(np.isin(values, [int(RowKind.UPDATE_BEFORE), int(RowKind.DELETE)]), -1, 1).astype(np.int64)
