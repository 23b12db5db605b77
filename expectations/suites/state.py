"""state: on Spark's aggregation state after the last micro-batch, no group counted below zero,
and no group whose rows were all retracted left in the sink."""

from __future__ import annotations

from jobs.changelog.columns import COUNT, SLOT

from expectations.sql import STREAM_VIEW, VALIDATED
from expectations.suites import LockstepExpectation, SuiteSpec


class ExpectNoNegativeGroupCounts(LockstepExpectation):
    description: str = "No group's live row count is negative (more retracted than inserted)."

    @classmethod
    def rows_query(cls, group_keys: tuple[str, ...], has_slots: bool) -> str:
        slot = f" AND key.{SLOT} = 0" if has_slots else ""
        keys = ", ".join(f"key.`{k}` AS `{k}`" for k in group_keys)
        head = f"{keys}, " if keys else ""
        return f"SELECT {head}value.{COUNT} AS live_rows FROM {VALIDATED} WHERE value.{COUNT} < 0{slot}"


class ExpectNoEmptyGroupInSink(LockstepExpectation):
    description: str = ("No group whose rows were all retracted (count 0) is left in the sink: it "
                        "was deleted, not kept with a zero count.")

    @classmethod
    def rows_query(cls, group_keys: tuple[str, ...], sink_key: tuple[str, ...], has_slots: bool) -> str:
        slot = f" AND st.key.{SLOT} = 0" if has_slots else ""
        match = " AND ".join(f"st.key.`{g}` <=> t.`{k}`" for g, k in zip(group_keys, sink_key))
        return (f"SELECT t.* FROM {VALIDATED} st JOIN {STREAM_VIEW} t ON {match} "
                f"WHERE st.value.{COUNT} = 0{slot}")


def state_suite(group_keys: tuple[str, ...], sink_key: tuple[str, ...], has_slots: bool,
                is_global: bool) -> SuiteSpec:
    found = [ExpectNoNegativeGroupCounts.build(group_keys, has_slots)]
    if not is_global:
        found.append(ExpectNoEmptyGroupInSink.build(group_keys, sink_key, has_slots))
    return SuiteSpec("state", "stream_state", tuple(found))
