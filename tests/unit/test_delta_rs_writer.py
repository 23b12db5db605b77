"""The delta-rs writer on its own (no Spark): upserts and deletes by key, copies of a multiset
table, a replayed micro-batch left out, and an upsert that changes nothing not written."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from jobs.changelog.columns import COUNT, DELETE, OP, UPSERT
from jobs.runtime.delta import read_change_feed
from jobs.stream.writers.delta_rs import DeltaRsWriter


def upserts(*rows: tuple) -> pa.Table:
    return pa.table({"k": pa.array([r[0] for r in rows], pa.int64()),
                     "v": pa.array([r[1] for r in rows], pa.int64()),
                     OP: pa.array([r[2] for r in rows], pa.string())})


def copies(*pairs: tuple) -> pa.Table:
    """Rows of a multiset table with the copies each gains (or loses)."""
    return pa.table({"v": pa.array([p[0] for p in pairs], pa.int64()),
                     COUNT: pa.array([p[1] for p in pairs], pa.int64())})


def keyed_writer(tmp_path) -> DeltaRsWriter:
    writer = DeltaRsWriter(tmp_path / "t", ("k",), "app")
    writer.create(upserts().drop_columns([OP]), "test")
    return writer


def rows(writer: DeltaRsWriter) -> list[dict]:
    return sorted(DeltaTable(writer.path).to_pyarrow_table().to_pylist(), key=lambda r: r["k"])


def test_upserts_and_deletes_by_key_and_a_replayed_batch_changes_nothing(tmp_path):
    writer = keyed_writer(tmp_path)
    writer.apply(upserts((1, 10, UPSERT), (2, 20, UPSERT)), 0)
    second = upserts((1, 11, UPSERT), (2, 0, DELETE), (3, 30, UPSERT))
    assert writer.apply(second, 1).changelog() == {"+I": 1, "-U": 1, "+U": 1, "-D": 1}
    version = writer.version()
    assert writer.apply(upserts((1, 99, UPSERT)), 1).skipped_replay  # batch 1 again
    assert writer.version() == version and writer.committed(1) and not writer.committed(2)
    assert rows(writer) == [{"k": 1, "v": 11}, {"k": 3, "v": 30}]


def test_an_upsert_that_changes_nothing_leaves_no_update_in_the_change_feed(tmp_path):
    writer = keyed_writer(tmp_path)
    writer.apply(upserts((1, 10, UPSERT)), 0)
    assert writer.apply(upserts((1, 10, UPSERT)), 1).changelog() == {"+I": 0, "-U": 0, "+U": 0, "-D": 0}
    kinds = read_change_feed(tmp_path / "t").column("_change_type").to_pylist()
    assert sorted(kinds) == ["insert"]


def test_a_multiset_table_adds_copies_and_drops_a_row_at_zero(tmp_path):
    writer = DeltaRsWriter(tmp_path / "m", ("v",), "app")
    writer.create(pa.table({"v": pa.array([], pa.int64()), COUNT: pa.array([], pa.int64())}), "test")
    writer.apply_counts(copies((1, 2), (2, 1)), 0)
    writer.apply_counts(copies((1, -1), (2, -1), (3, -4)), 1)  # a row never there gains no copies
    assert DeltaTable(writer.path).to_pyarrow_table().to_pylist() == [{"v": 1, COUNT: 1}]
