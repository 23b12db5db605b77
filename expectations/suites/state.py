"""state: on the aggregation state after the last micro-batch, no group counted below zero, and
no sink row for a group without live rows (all retracted, or never seen)."""

from __future__ import annotations

from expectations.sql import STREAM_VIEW, VALIDATED
from expectations.suites import LockstepExpectation, SuiteSpec
from jobs.changelog.columns import COUNT, SLOT


class ExpectNoNegativeGroupCounts(LockstepExpectation):
    description: str = "No group's live row count is negative (more retracted than inserted)."

    @classmethod
    def rows_query(cls, group_keys: tuple[str, ...], has_slots: bool) -> str:
        slot = f" AND key.{SLOT} = 0" if has_slots else ""
        keys = ", ".join(f"key.`{k}` AS `{k}`" for k in group_keys)
        head = f"{keys}, " if keys else ""
        return f"SELECT {head}value.{COUNT} AS live_rows FROM {VALIDATED} WHERE value.{COUNT} < 0{slot}"


class ExpectNoEmptyGroupInSink(LockstepExpectation):
    description: str = (
        "No sink row is for a group without live rows in the state: a group whose "
        "rows were all retracted was deleted, not kept with a zero count. (lockstep's "
        "state forgets such a group; Spark's keeps it with count 0.)"
    )

    @classmethod
    def rows_query(cls, key_pairs: tuple[tuple[str, str], ...], has_slots: bool) -> str:
        """key_pairs: (group key in the state, the sink column holding it) for every sink key column."""
        slot = f" AND st.key.{SLOT} = 0" if has_slots else ""
        match = " AND ".join(f"st.key.`{g}` <=> t.`{k}`" for g, k in key_pairs)
        return (
            f"SELECT t.* FROM {STREAM_VIEW} t LEFT JOIN {VALIDATED} st ON {match}{slot} "
            f"WHERE coalesce(st.value.{COUNT}, 0) = 0"
        )


def state_suite(
    group_keys: tuple[str, ...], key_pairs: tuple[tuple[str, str], ...] | None, has_slots: bool, is_global: bool
) -> SuiteSpec:
    """key_pairs: how the sink key holds the group keys; None when the sink key is computed from
    them (CONCAT(g, k)): a sink row cannot be traced to its group, so the empty-group rule is not
    checked here (the unity suite still finds a row the batch result lacks)."""
    found = [ExpectNoNegativeGroupCounts.build(group_keys, has_slots)]
    if is_global:
        return SuiteSpec("state", "stream_state", tuple(found))
    if key_pairs is None:
        skipped = (
            (
                ExpectNoEmptyGroupInSink.expectation_type,
                "the sink key is computed from the group keys: a sink row cannot be traced to its group",
            ),
        )
        return SuiteSpec("state", "stream_state", tuple(found), skipped)
    found.append(ExpectNoEmptyGroupInSink.build(key_pairs, has_slots))
    return SuiteSpec("state", "stream_state", tuple(found))
