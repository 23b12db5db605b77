"""The Delta upsert sink: MERGE each micro-batch's net change by primary key, exactly once.

The table's change data feed is the output changelog: insert (+I), update_preimage (-U),
update_postimage (+U), delete (-D). An update whose values do not change anything is not
written, so the feed never holds a -U/+U pair with equal images.

Every commit carries a transaction (application id, micro-batch id). A micro-batch that Spark
replays after a crash finds its id already committed and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from jobs.changelog.columns import COUNT, DELETE, OP, UPSERT



@dataclass(frozen=True)
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    skipped_replay: bool = False

    def changelog(self) -> dict[str, int]:
        return {"+I": self.inserted, "-U": self.updated, "+U": self.updated, "-D": self.deleted}


class DeltaUpsertSink:
    def __init__(self, path: Path, key: tuple[str, ...], app_id: str):
        self.path, self.key, self.app_id = str(path), key, app_id

    def exists(self) -> bool:
        return DeltaTable.is_deltatable(self.path)

    def create(self, initial: pa.Table, description: str) -> None:
        """Create the table holding the query's result on an empty input (no rows, except for
        a global aggregate's one row)."""
        write_deltalake(self.path, initial, mode="error", description=description,
                        configuration={"delta.enableChangeDataFeed": "true"})

    def committed(self, batch_id: int) -> bool:
        done = DeltaTable(self.path).transaction_version(self.app_id)
        return done is not None and done >= batch_id

    def apply(self, changes: pa.Table, batch_id: int) -> MergeCounts:
        """Apply rows tagged with __op = upsert | delete; at most one row per key."""
        table = DeltaTable(self.path)
        if self.committed(batch_id):
            return MergeCounts(skipped_replay=True)
        if changes.num_rows == 0:
            return MergeCounts()
        values = [n for n in changes.column_names if n != OP and n not in self.key]
        merge = table.merge(changes, predicate=self._match(), source_alias="s", target_alias="t",
                            commit_properties=CommitProperties(
                                app_transactions=[Transaction(self.app_id, batch_id)]))
        merge = merge.when_matched_delete(predicate=f"s.{OP} = '{DELETE}'")
        if values:
            changed = " OR ".join(f"(t.`{v}` IS DISTINCT FROM s.`{v}`)" for v in values)
            merge = merge.when_matched_update(updates={f"`{v}`": f"s.`{v}`" for v in values},
                                              predicate=f"s.{OP} = '{UPSERT}' AND ({changed})")
        columns = [n for n in changes.column_names if n != OP]
        merge = merge.when_not_matched_insert(updates={f"`{c}`": f"s.`{c}`" for c in columns},
                                              predicate=f"s.{OP} = '{UPSERT}'")
        metrics = merge.execute()
        return MergeCounts(metrics["num_target_rows_inserted"], metrics["num_target_rows_updated"],
                           metrics["num_target_rows_deleted"])

    def write(self, changes: pa.Table, batch_id: int, mode: str) -> MergeCounts:
        """Write one micro-batch's change the way the sink's changelog mode asks."""
        if mode == "retract":
            return self.apply_counts(changes, batch_id)
        return self.apply(changes, batch_id)

    def apply_counts(self, changes: pa.Table, batch_id: int) -> MergeCounts:
        """A multiset sink (key = every column): add `__count` to each row's copies; a row whose
        copies reach 0 is deleted."""
        table = DeltaTable(self.path)
        if self.committed(batch_id):
            return MergeCounts(skipped_replay=True)
        if changes.num_rows == 0:
            return MergeCounts()
        total = f"t.`{COUNT}` + s.`{COUNT}`"
        merge = table.merge(changes, predicate=self._match(), source_alias="s", target_alias="t",
                            commit_properties=CommitProperties(
                                app_transactions=[Transaction(self.app_id, batch_id)]))
        merge = merge.when_matched_delete(predicate=f"{total} <= 0")
        merge = merge.when_matched_update(updates={f"`{COUNT}`": total})
        columns = changes.column_names
        merge = merge.when_not_matched_insert(updates={f"`{c}`": f"s.`{c}`" for c in columns},
                                              predicate=f"s.`{COUNT}` > 0")
        metrics = merge.execute()
        return MergeCounts(metrics["num_target_rows_inserted"], metrics["num_target_rows_updated"],
                           metrics["num_target_rows_deleted"])

    def _match(self) -> str:
        if not self.key:
            return "true"
        return " AND ".join(f"(t.`{k}` IS NOT DISTINCT FROM s.`{k}`)" for k in self.key)

    def version(self) -> int:
        return DeltaTable(self.path).version()

    def snapshot(self) -> pa.Table:
        return DeltaTable(self.path).to_pyarrow_table()
