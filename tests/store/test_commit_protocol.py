"""The object store's commit protocol and lease against a real S3 server (SeaweedFS)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from jobs.cli.local_store import ACCESS_KEY
from jobs.errors import RunLocked, StoreError
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore
from jobs.store.lease import Lease
from jobs.store.mirror import Mirror
from jobs.store.url import StoreUrl


def test_put_if_absent_creates_once(store, bucket, prefix):
    assert store.put(bucket, f"{prefix}/k", b"first", if_absent=True)
    assert not store.put(bucket, f"{prefix}/k", b"second", if_absent=True)
    assert store.get(bucket, f"{prefix}/k") == b"first"


def test_a_second_lease_is_refused_until_the_first_is_released(store, bucket, prefix):
    run = StoreUrl(bucket, f"{prefix}/q")
    first, second = Lease(store, run, seconds=30), Lease(store, run, seconds=30)
    first.acquire()
    with pytest.raises(RunLocked, match="in use by pid"):
        second.acquire()
    first.release()
    second.acquire()
    assert second.holds() and not first.holds()
    second.release()


def test_a_lapsed_lease_is_taken_over_and_its_holder_cannot_commit(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    crashed = Lease(store, run, seconds=2)
    crashed.acquire()
    crashed._stop.set()  # a holder that stopped renewing (killed, or stalled past its lease)
    time.sleep(2.5)
    taker = Lease(store, run, seconds=30)
    taker.acquire()
    mirror = Mirror(store, run, tmp_path / "work" / "q")
    (mirror.root / "_state").mkdir(parents=True)
    (mirror.root / "_state" / "x").write_text("1")
    with pytest.raises(StoreError, match="lease on the run folder lapsed"):
        mirror.commit(None, crashed.holds)
    assert mirror.newest() is None
    taker.release()


def _working_copy(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_commit_restores_into_a_fresh_working_copy(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    writer = Mirror(store, run, tmp_path / "a" / "q")
    _working_copy(
        writer.root,
        {
            "_state/consistency.json": '{"v": 1}',
            "stream/part-0.parquet": "data",
            "stream/_delta_log/00000000000000000000.json": '{"commitInfo": {}}',
            "report.json": '{"verdict": "pass"}',
        },
    )
    first = writer.commit(None, lambda: True)
    (writer.root / "_state" / "consistency.json").write_text('{"v": 2}')
    second = writer.commit(first, lambda: True)

    reader = Mirror(store, run, tmp_path / "b" / "q")
    restored = reader.restore()
    assert restored is not None and restored.number == second.number == 2
    assert (reader.root / "_state" / "consistency.json").read_text() == '{"v": 2}'
    # The public view: the table and the report at their own keys, lockstep's state only by content.
    assert store.get(bucket, f"{prefix}/q/stream/_delta_log/00000000000000000000.json") == b'{"commitInfo": {}}'
    assert store.get(bucket, f"{prefix}/q/report.json") == b'{"verdict": "pass"}'
    assert store.get(bucket, f"{prefix}/q/_state/consistency.json") is None
    kept = [k.key for k in store.list(bucket, f"{prefix}/q/_commits/")]
    assert len(kept) == 2


def test_a_step_that_never_committed_is_undone_by_the_next_restore(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    mirror = Mirror(store, run, tmp_path / "w" / "q")
    _working_copy(mirror.root, {"_state/point.json": "old"})
    committed = mirror.commit(None, lambda: True)
    mirror.begin(committed)  # a step starts, writes, and is killed before its commit
    _working_copy(mirror.root, {"_state/point.json": "half", "_state/segment-9": "partial"})
    mirror.restore()
    assert (mirror.root / "_state" / "point.json").read_text() == "old"
    assert not (mirror.root / "_state" / "segment-9").exists()


def test_a_delta_log_entry_with_other_content_is_refused(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    log = "stream/_delta_log/00000000000000000000.json"
    store.put(bucket, f"{prefix}/q/{log}", b"someone else's version 0")
    mirror = Mirror(store, run, tmp_path / "w" / "q")
    _working_copy(mirror.root, {log: "ours"})
    with pytest.raises(StoreError, match="already has this version with other content"):
        mirror.commit(None, lambda: True)


def test_wrong_credentials_and_a_missing_bucket_are_one_line(s3_server, bucket, prefix):
    wrong = ObjectStore(StoreAccess(s3_server.endpoint, "us-east-1", ACCESS_KEY, "not-the-secret"))
    with pytest.raises(StoreError, match="refused the credentials of access key 'lockstep-local'"):
        wrong.check_bucket(bucket)
    right = ObjectStore(StoreAccess(s3_server.endpoint, "us-east-1", *_keys(s3_server)))
    with pytest.raises(StoreError, match="no bucket 'absent'"):
        right.check_bucket("absent")


def test_an_unreachable_store_is_one_line(tmp_path):
    from jobs.cli.local_store import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"
    store = ObjectStore(StoreAccess(endpoint, "us-east-1", "k", "s"))
    with pytest.raises(StoreError, match=f"cannot reach the object store at {endpoint}"):
        store.check_bucket("b")


def _keys(server) -> tuple[str, str]:
    env = server.environment()
    return env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]


def test_commit_records_name_every_file_with_its_hash(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    mirror = Mirror(store, run, tmp_path / "w" / "q")
    _working_copy(mirror.root, {"_state/a": "x", "_state/b": "x"})
    mirror.commit(None, lambda: True)
    record = json.loads(store.get(bucket, f"{prefix}/q/_commits/000000000001.json"))
    assert set(record["files"]) == {"_state/a", "_state/b"}
    assert record["files"]["_state/a"][2] == record["files"]["_state/b"][2]  # one blob for equal content
    assert len(store.list(bucket, f"{prefix}/q/_blobs/")) == 1


def test_a_working_copy_unchanged_since_the_last_commit_writes_no_record(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    mirror = Mirror(store, run, tmp_path / "q")
    _working_copy(mirror.root, {"_state/consistency.json": '{"v": 1}'})
    first = mirror.commit(None, lambda: True)
    assert mirror.commit(first, lambda: True) is None  # as a micro-batch that changed nothing leaves it
    (mirror.root / "_state" / "consistency.json").write_text('{"v": 2}')
    second = mirror.commit(first, lambda: True)
    assert first is not None and second is not None and second.number == first.number + 1
    assert len(store.list(bucket, f"{prefix}/q/_commits/")) == 2


def test_a_restored_file_keeps_its_modification_time(store, bucket, prefix, tmp_path):
    # Spark's file source orders the staged segments by it, and reads again a file it forgot.
    run = StoreUrl(bucket, f"{prefix}/q")
    writer = Mirror(store, run, tmp_path / "a" / "q")
    segment = "_state/staged/orders/segments/seg-000000000000.parquet"
    _working_copy(writer.root, {segment: "rows"})
    os.utime(writer.root / segment, (1_000_000_000, 1_000_000_000))
    writer.commit(None, lambda: True)
    reader = Mirror(store, run, tmp_path / "b" / "q")
    reader.restore()
    assert (reader.root / segment).stat().st_mtime == 1_000_000_000
