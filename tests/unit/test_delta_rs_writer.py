"""The delta-rs writer on its own (no Spark): upserts and deletes by key, copies of a multiset
table, a replayed micro-batch left out, an upsert that changes nothing not written, the key
ranges that let a MERGE skip files changing no match, and a table cleared at once."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT, DELETE, OP, UPSERT
from jobs.runtime.delta import read_change_feed
from jobs.stream.writers.delta_rs import DeltaRsWriter


def upserts(*rows: tuple) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
            OP: pa.array([r[2] for r in rows], pa.string()),
        }
    )


def copies(*pairs: tuple) -> pa.Table:
    """Rows of a multiset table with the copies each gains (or loses)."""
    return pa.table(
        {"v": pa.array([p[0] for p in pairs], pa.int64()), COUNT: pa.array([p[1] for p in pairs], pa.int64())}
    )


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


KEY_INTS = st.sampled_from([None, -(2**63), -1, 0, 7, 2**63 - 1])
KEY_TEXTS = st.sampled_from([None, "", "a'b", "c\\d", "é", "''", "z"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(st.tuples(KEY_INTS, KEY_TEXTS, st.integers(0, 3), st.booleans()), max_size=6), min_size=1, max_size=5
    )
)
def test_the_key_ranges_change_no_match(tmp_path_factory, batches):
    """The MERGE's key ranges (NULLs, int64's extremes, quotes, backslashes) leave the table
    the upserts and deletes make of it."""
    writer = DeltaRsWriter(tmp_path_factory.mktemp("t") / "t", ("k", "s"), "app")
    schema = pa.schema([("k", pa.int64()), ("s", pa.string()), ("v", pa.int64())])
    writer.create(schema.empty_table(), "test")
    model: dict = {}
    for batch_id, batch in enumerate(batches):
        last = {(k, s): (v, delete) for k, s, v, delete in batch}  # one change per key
        for key, (v, delete) in last.items():
            model.pop(key, None) if delete else model.__setitem__(key, v)
        changes = pa.table(
            {
                "k": pa.array([k for k, _ in last], pa.int64()),
                "s": pa.array([s for _, s in last]),
                "v": pa.array([v for v, _ in last.values()], pa.int64()),
                OP: pa.array([DELETE if d else UPSERT for _, d in last.values()]),
            }
        )
        writer.apply(changes, batch_id)
        assert {(r["k"], r["s"]): r["v"] for r in writer.snapshot().to_pylist()} == model


def test_new_keys_above_the_table_read_none_of_its_files(tmp_path):
    writer = keyed_writer(tmp_path)
    for batch_id in range(4):  # four files of keys 0-99, 100-199, ...
        writer.apply(upserts(*[(k, k, UPSERT) for k in range(batch_id * 100, batch_id * 100 + 100)]), batch_id)
    writer.apply(upserts((1000, 1, UPSERT), (1001, 1, UPSERT)), 4)
    merge = DeltaTable(writer.path).history(1)[0]["operationMetrics"]
    assert merge["num_target_files_scanned"] == 0 and merge["num_target_files_skipped_during_scan"] == 4
    writer.apply(upserts((150, -1, UPSERT)), 5)  # an update reads the one file its key range meets
    merge = DeltaTable(writer.path).history(1)[0]["operationMetrics"]
    assert merge["num_target_files_scanned"] == 1
    assert rows(writer)[150] == {"k": 150, "v": -1}


def test_changes_into_an_empty_table_are_appended_as_the_merge_would_write_them(tmp_path):
    writer = keyed_writer(tmp_path)
    first = upserts((1, 10, UPSERT), (2, 0, DELETE), (3, 30, UPSERT))  # a delete of a key never there
    assert writer.apply(first, 0).changelog() == {"+I": 2, "-U": 0, "+U": 0, "-D": 0}
    assert DeltaTable(writer.path).history(1)[0]["operation"] == "WRITE"  # an append, not a MERGE
    assert writer.apply(first, 0).skipped_replay and writer.committed(0)
    assert rows(writer) == [{"k": 1, "v": 10}, {"k": 3, "v": 30}]
    feed = read_change_feed(tmp_path / "t").select(["k", "_change_type"]).to_pylist()
    assert sorted(feed, key=lambda r: r["k"]) == [
        {"k": 1, "_change_type": "insert"},
        {"k": 3, "_change_type": "insert"},
    ]
    writer.apply(upserts((1, 11, UPSERT)), 1)  # the table has a file now: a MERGE
    assert DeltaTable(writer.path).history(1)[0]["operation"] == "MERGE"
    assert rows(writer) == [{"k": 1, "v": 11}, {"k": 3, "v": 30}]


def test_changes_of_another_type_than_the_empty_tables_are_merged_and_cast(tmp_path):
    writer = keyed_writer(tmp_path)  # v is int64 in the table
    narrow = upserts((1, 10, UPSERT)).set_column(1, "v", pa.array([10], pa.int32()))
    writer.apply(narrow, 0)
    assert DeltaTable(writer.path).history(1)[0]["operation"] == "MERGE"
    assert DeltaTable(writer.path).to_pyarrow_table().schema.field("v").type == pa.int64()
    assert rows(writer) == [{"k": 1, "v": 10}]


def test_a_cleared_table_is_empty_with_its_schema_and_a_replayed_clear_writes_nothing(tmp_path):
    writer = keyed_writer(tmp_path)
    writer.apply(upserts((1, 10, UPSERT), (2, 20, UPSERT)), 0)
    writer.clear(1)
    assert rows(writer) == [] and writer.committed(1)
    assert pa.schema(DeltaTable(writer.path).schema().to_arrow()).names == ["k", "v"]
    writer.apply(upserts((3, 30, UPSERT)), 2)
    version = writer.version()
    writer.clear(1)  # micro-batch 1 replayed after a crash: its clear is committed already
    assert writer.version() == version and rows(writer) == [{"k": 3, "v": 30}]
