"""StorePath against the real server: the part of pathlib's interface the run-folder code uses
behaves on the store as on a local disk, and the checkpoint readers work on either."""

from __future__ import annotations

import pickle

import pytest

from jobs.cli.local_store import ACCESS_KEY, SECRET_KEY
from jobs.store.access import StoreAccess
from jobs.store.files import remove_tree, replace_whole
from jobs.store.paths import StorePath
from jobs.stream.offsets import committed_batches, logged_files, planned_batches, read_up_to
from jobs.stream.spark_logs import forget_unplanned_finds
from tests.unit.test_offsets import segment, spark_like_log, write_offsets


@pytest.fixture
def root(s3_server, shared_bucket, prefix) -> StorePath:
    access = StoreAccess(s3_server.endpoint, "us-east-1", ACCESS_KEY, SECRET_KEY)
    return StorePath.of(f"s3a://{shared_bucket}/{prefix}/run", access)


@pytest.fixture(params=["local", "store"])
def folder(request, tmp_path, root):
    """The same test on a local folder and on a folder of the store."""
    return tmp_path / "run" if request.param == "local" else root


def _names(paths) -> list[str]:
    return sorted(p.name for p in paths)


def test_files_and_folders_are_listed_read_and_removed_as_on_a_disk(folder):
    assert not folder.exists()
    (folder / "a").mkdir(parents=True, exist_ok=True)
    (folder / "a" / "one.json").write_text('{"n": 1}')
    (folder / "a" / "deeper").mkdir(parents=True, exist_ok=True)
    (folder / "a" / "deeper" / "two.bin").write_bytes(b"\x00\x01")
    (folder / "b.txt").write_text("b")
    assert folder.is_dir() and not folder.is_file()
    assert (folder / "b.txt").is_file() and not (folder / "b.txt").is_dir()
    assert _names(folder.iterdir()) == ["a", "b.txt"]
    assert _names((folder / "a").glob("*.json")) == ["one.json"]
    assert (folder / "a" / "deeper" / "two.bin").read_bytes() == b"\x00\x01"
    assert (folder / "a" / "one.json").stat().st_size == 8
    assert (folder / "a" / "one.json").with_name("x.json").parent.name == "a"
    (folder / "b.txt").unlink()
    (folder / "b.txt").unlink(missing_ok=True)
    with pytest.raises(FileNotFoundError):
        (folder / "b.txt").read_text()
    remove_tree(folder / "a")
    assert not (folder / "a").exists()


def test_a_replaced_file_holds_the_new_content_whole(folder):
    target = folder / "point.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_whole(target, "old")
    replace_whole(target, b"new")
    assert target.read_text() == "new"
    assert _names(folder.iterdir()) == ["point.json"]  # no temporary file left beside it


def test_a_store_path_pickles_for_a_spark_task_and_reads_there(root):
    (root / "x").write_text("seen")
    copy = pickle.loads(pickle.dumps(root / "x"))
    assert copy == root / "x" and copy.read_text() == "seen"
    assert str(copy).startswith("s3a://")


def test_the_checkpoint_readers_and_the_unplanned_find_rewrite_work_on_the_store(root):
    checkpoint = root / "checkpoint"
    spark_like_log(checkpoint, 10, keep_old=False)  # entries 0..9 in 9.compact
    for batch in range(9):
        write_offsets(checkpoint, batch, batch)
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    assert planned_batches(checkpoint) == list(range(9)) and committed_batches(checkpoint) == [0]
    assert read_up_to(checkpoint, 0, 8) == 8
    assert forget_unplanned_finds(checkpoint) == 1  # entry 9 was found but never planned
    assert logged_files(checkpoint, 0) == {b: {segment(b)} for b in range(9)}
    assert forget_unplanned_finds(checkpoint) == 0


def test_a_path_of_a_missing_file_says_so(root: StorePath):
    with pytest.raises(FileNotFoundError):
        (root / "nothing").stat()
    with pytest.raises(FileNotFoundError):
        (root / "nothing").unlink()
