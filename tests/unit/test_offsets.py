"""What each micro-batch read, from the file source's log in Spark's checkpoint: the newest
`<c>.compact` file covers every batch up to c, so the files before it are not read again."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.changelog.staging import StagedChangelog, stage_source
from jobs.spec.model import SourceSpec, StreamSpec
from jobs.stream.offsets import largest_unread_segment, logged_files
from tests.conftest import change, write_changelog


def write_log(folder: Path, name: str, entries: dict[int, list[str]]) -> None:
    """A log file as Spark's file source writes it: a version line, then one JSON entry per file."""
    lines = ["v1"] + [json.dumps({"path": f"file:///runs/q/staged/orders/segments/{file}", "timestamp": 0,
                                  "batchId": batch}) for batch, files in entries.items() for file in files]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")


def segment(batch: int) -> str:
    return f"segment-{batch:06d}.parquet"


def spark_like_log(checkpoint: Path, batches: int, keep_old: bool) -> Path:
    """Batches 0..batches-1, compacted every ten (9.compact, 19.compact, ...) with everything before."""
    folder = checkpoint / "sources" / "0"
    for batch in range(batches):
        if (batch + 1) % 10 == 0:
            write_log(folder, f"{batch}.compact", {b: [segment(b)] for b in range(batch + 1)})
        elif keep_old or batch > (batches // 10) * 10 - 1:
            write_log(folder, str(batch), {batch: [segment(batch)]})
    return folder


def test_every_batch_is_found_whether_spark_has_deleted_the_compacted_files_or_not(tmp_path):
    expected = {batch: {segment(batch)} for batch in range(23)}
    spark_like_log(tmp_path / "kept", 23, keep_old=True)
    spark_like_log(tmp_path / "deleted", 23, keep_old=False)
    assert logged_files(tmp_path / "kept", 0) == expected
    assert logged_files(tmp_path / "deleted", 0) == expected


def test_the_newest_compact_file_is_the_record_for_the_batches_it_covers(tmp_path):
    folder = spark_like_log(tmp_path, 23, keep_old=True)
    # Stale records before the newest compact file: read, they would add these names.
    write_log(folder, "3", {3: ["stale-plain.parquet"]})
    write_log(folder, "9.compact", {3: ["stale-compact.parquet"]})
    found = logged_files(tmp_path, 0)
    assert found[3] == {segment(3)}
    assert found[22] == {segment(22)}  # a plain file after the newest compact one


def test_a_source_without_a_log_yet_has_read_nothing(tmp_path):
    assert logged_files(tmp_path, 0) == {}
    write_log(tmp_path / "sources" / "0", "0", {0: [segment(0)]})
    (tmp_path / "sources" / "0" / ".0.crc").write_text("checksum")  # Spark's side files are skipped
    assert logged_files(tmp_path, 0) == {0: {segment(0)}}


def _stage(tmp_path: Path, name: str, orders: range) -> StagedChangelog:
    spec = SourceSpec(path=tmp_path / "orders", format="changelog-json",
                      schema="order_id BIGINT, pId BIGINT, income BIGINT", primary_key=("order_id",))
    write_changelog(tmp_path / "orders", name, [change("+I", n, n % 3, n) for n in orders])
    _, commit = stage_source("orders", spec, tmp_path / "staged", tmp_path / "quarantine",
                             batch_size=StreamSpec(rows_per_batch=100))
    commit()
    return StagedChangelog(tmp_path / "staged")


def test_the_next_runs_largest_micro_batch_counts_only_segments_not_yet_consumed(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    staged = _stage(tmp_path, "a.json", range(100))
    assert largest_unread_segment(checkpoint, 0, staged) == 100  # nothing committed yet
    first = Path(staged.segments()[0]["file"]).name
    write_log(checkpoint / "sources" / "0", "0", {0: [first]})
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    staged = _stage(tmp_path, "b.json", range(100, 104))
    assert [s["rows"] for s in staged.segments()] == [100, 4]
    assert largest_unread_segment(checkpoint, 0, staged) == 4
