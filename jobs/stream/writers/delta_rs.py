"""The delta-rs writer: each micro-batch's changes come to the driver as Arrow and are merged
there by delta-rs (Rust, embedded). No JVM connector; the table is a standard Delta table that
delta-spark reads and continues.

The same class keeps the stream's driver-side state tables (the pending windows of `emit: final`),
which are small and read back whole after each micro-batch.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from jobs.changelog.columns import COUNT, OP, UPSERT
from jobs.runtime.delta import is_committed, is_delta_table, open_delta
from jobs.stream.writers import Changes, MergeCounts
from jobs.stream.writers.merge import (
    COPIES,
    GAINS_COPIES,
    IS_DELETE,
    IS_UPSERT,
    from_source,
    key_matches,
    value_changes,
    values_of,
    written_columns,
)

TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true"}


class DeltaRsWriter:
    def __init__(self, path: Path, key: tuple[str, ...], app_id: str):
        self.location, self.key, self.app_id = path, key, app_id  # a local Path, or a StorePath
        self.path = str(path)
        self._open: DeltaTable | None = None

    def _latest(self) -> DeltaTable:
        """The table at its newest version, for the replay check and the MERGE (one log read
        for both). Opened once per writer, then brought up to date from the log's new entries:
        a fresh open reads every commit since the last checkpoint (delta-rs writes one every
        hundred), 3 ms after a checkpoint and 21 ms before the next one, against 1-3 ms."""
        if self._open is None:
            self._open = open_delta(self.location)
        else:
            self._open.update_incremental()
        return self._open

    def exists(self) -> bool:
        return is_delta_table(self.location)

    def create(self, initial: pa.Table, description: str) -> None:
        write_deltalake(
            self.path,
            initial,
            mode="error",
            description=description,
            configuration=TABLE_PROPERTIES,
            storage_options=getattr(self.location, "storage_options", None),
        )

    def committed(self, batch_id: int) -> bool:
        return is_committed(open_delta(self.location), self.app_id, batch_id)

    def write(self, changes: Changes, batch_id: int, mode: str) -> MergeCounts:
        rows = changes.arrow()  # computes the micro-batch's changes
        started = time.monotonic()
        merged = self.apply_counts(rows, batch_id) if mode == "retract" else self.apply(rows, batch_id)
        return dataclasses.replace(merged, seconds=time.monotonic() - started)

    def apply(self, changes: pa.Table, batch_id: int) -> MergeCounts:
        """Rows tagged __op = upsert | delete, at most one per key."""
        table = self._latest()
        if is_committed(table, self.app_id, batch_id):
            return MergeCounts(skipped_replay=True)
        if changes.num_rows == 0:
            return MergeCounts()
        inserts = _inserts_into_empty(table, changes)
        if inserts is not None:
            write_deltalake(table, inserts, mode="append", commit_properties=self._commit(batch_id))
            return MergeCounts(inserted=inserts.num_rows)
        merge = self._merge(table, changes, batch_id).when_matched_delete(predicate=IS_DELETE)
        values = values_of(changes.column_names, self.key)
        if values:
            merge = merge.when_matched_update(updates=from_source(values), predicate=value_changes(values))
        columns = written_columns(changes.column_names)
        merge = merge.when_not_matched_insert(updates=from_source(columns), predicate=IS_UPSERT)
        return _counts(merge.execute())

    def apply_counts(self, changes: pa.Table, batch_id: int) -> MergeCounts:
        """A multiset table (key = every column): add `__count` to each row's copies; a row whose
        copies reach 0 is deleted."""
        table = self._latest()
        if is_committed(table, self.app_id, batch_id):
            return MergeCounts(skipped_replay=True)
        if changes.num_rows == 0:
            return MergeCounts()
        merge = (
            self._merge(table, changes, batch_id)
            .when_matched_delete(predicate=f"{COPIES} <= 0")
            .when_matched_update(updates={f"`{COUNT}`": COPIES})
            .when_not_matched_insert(updates=from_source(changes.column_names), predicate=GAINS_COPIES)
        )
        return _counts(merge.execute())

    def clear(self, batch_id: int) -> None:
        """Every row deleted, as one overwrite with no rows under the micro-batch's transaction (a
        replay sees it and writes nothing). A MERGE that deletes a whole table reads and matches
        all of it: deleting 538,688 open windows took 0.65-0.97 s as a MERGE, 0.01 s as this."""
        table = self._latest()
        if not is_committed(table, self.app_id, batch_id):
            empty = pa.schema(table.schema().to_arrow()).empty_table()
            write_deltalake(table, empty, mode="overwrite", commit_properties=self._commit(batch_id))

    def _merge(self, table: DeltaTable, changes: pa.Table, batch_id: int):
        return table.merge(
            changes,
            predicate=key_matches(self.key) + key_ranges(changes, self.key),
            source_alias="s",
            target_alias="t",
            commit_properties=self._commit(batch_id),
        )

    def _commit(self, batch_id: int) -> CommitProperties:
        """The micro-batch's id recorded in the commit (Delta's txn action): a replay sees it."""
        return CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])

    def version(self) -> int:
        return open_delta(self.location).version()

    def snapshot(self) -> pa.Table:
        return open_delta(self.location).to_pyarrow_table()


def _inserts_into_empty(table: DeltaTable, changes: pa.Table) -> pa.Table | None:
    """What a MERGE of `changes` into `table` would write, when the table holds no data file:
    every upsert row is an insert and every delete matches nothing. Appended, that costs a sixth
    of the MERGE (500,000 rows: 0.06 s against 0.30-0.37 s), and the change feed reads an
    append's rows as inserts, as it reads the MERGE's. The first micro-batch into a new sink or
    a window's open-windows table is such a case. None (MERGE as usual) when the table has
    files, or when a column's name or type differs from the table's: the MERGE casts, an append
    does not."""
    if table.file_uris():
        return None
    target = pa.schema(table.schema().to_arrow())
    if set(written_columns(changes.column_names)) != set(target.names):
        return None
    rows = changes.filter(pc.equal(changes.column(OP), UPSERT)).select(target.names)
    if any(rows.schema.field(name).type != target.field(name).type for name in target.names):
        return None
    return rows


def key_ranges(changes: pa.Table, key: tuple[str, ...]) -> str:
    """Conditions on the target's key columns that every row the changes can match meets: each
    integer or string key column between the changes' least and greatest value (or NULL where
    they hold a NULL). They change no match, but let delta-rs skip the files whose statistics
    lie outside, which it does not do for the key equality alone: a micro-batch of new keys
    above the table's (ever-growing ids) then reads none of the table's files, not all of them.
    Other types (floats: -0.0, NaN) get no condition. Literals are written as delta-rs parses
    them (DataFusion's SQL, where a backslash is no escape)."""
    return "".join(_key_range(changes.column(k), k) for k in key if changes.num_rows)


def _key_range(values: pa.ChunkedArray, name: str) -> str:
    if not (
        pa.types.is_integer(values.type) or pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    ):
        return ""
    column = f"t.`{name}`"
    bounds = pc.min_max(values)
    if not bounds["min"].is_valid:
        return f" AND ({column} IS NULL)"
    low, high = (_literal(bounds[b].as_py()) for b in ("min", "max"))
    inside = f"{column} >= {low} AND {column} <= {high}"
    return f" AND ({column} IS NULL OR {inside})" if values.null_count else f" AND ({inside})"


def _literal(value: int | str) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


def _counts(metrics: dict) -> MergeCounts:
    return MergeCounts(
        metrics["num_target_rows_inserted"], metrics["num_target_rows_updated"], metrics["num_target_rows_deleted"]
    )
