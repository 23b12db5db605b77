"""What each micro-batch read, from the file source's log in Spark's checkpoint: the newest
`<c>.compact` file covers every batch up to c, so the files before it are not read again."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.changelog.staging import StagedChangelog, stage_source
from jobs.spec.model import SourceSpec, StreamSpec
from jobs.stream.offsets import batch_segments, consumed_rows, largest_unread_segment, logged_files, read_up_to
from tests.conftest import change, write_changelog


def write_log(folder: Path, name: str, entries: dict[int, list[str]]) -> None:
    """A log file as Spark's file source writes it: a version line, then one JSON entry per file."""
    lines = ["v1"] + [
        json.dumps({"path": f"file:///runs/q/staged/orders/segments/{file}", "timestamp": 0, "batchId": batch})
        for batch, files in entries.items()
        for file in files
    ]
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


def _stage(tmp_path: Path, name: str, orders: range, rows_per_batch: int = 100) -> StagedChangelog:
    spec = SourceSpec(
        path=tmp_path / "orders",
        format="changelog-json",
        schema="order_id BIGINT, pId BIGINT, income BIGINT",
        primary_key=("order_id",),
    )
    write_changelog(tmp_path / "orders", name, [change("+I", n, n % 3, n) for n in orders])
    _, commit = stage_source(
        "orders",
        spec,
        tmp_path / "staged",
        tmp_path / "quarantine",
        batch_size=StreamSpec(rows_per_batch=rows_per_batch),
    )
    commit()
    return StagedChangelog(tmp_path / "staged")


def test_the_next_runs_largest_micro_batch_counts_only_segments_not_yet_consumed(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    staged = _stage(tmp_path, "a.json", range(100))
    assert largest_unread_segment(checkpoint, 0, staged) == 100  # nothing committed yet
    first = Path(staged.segments()[0]["file"]).name
    write_log(checkpoint / "sources" / "0", "0", {0: [first]})
    write_offsets(checkpoint, 0, 0)
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    staged = _stage(tmp_path, "b.json", range(100, 104))
    assert [s["rows"] for s in staged.segments()] == [100, 4]
    assert largest_unread_segment(checkpoint, 0, staged) == 4


def write_offsets(checkpoint: Path, batch: int, *log_offsets: int | None) -> None:
    """An offset log entry as Spark writes it: a version line, the batch's metadata, then one
    line per source ("-" for a source without an offset yet)."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    sources = ["-" if o is None else json.dumps({"logOffset": o}) for o in log_offsets]
    (folder / str(batch)).write_text("\n".join(["v1", json.dumps({"batchWatermarkMs": 0}), *sources]) + "\n")


def test_a_micro_batch_reads_the_file_log_entries_after_the_previous_offset_up_to_its_own(tmp_path):
    # A run killed after the file source logged entry 2 but before micro-batch 2's offset was
    # recorded: the restarted run's micro-batch 2 reads entries 2 and 3, micro-batch 3 entry 4.
    staged = _stage(tmp_path, "a.json", range(10), rows_per_batch=2)
    names = [Path(s["file"]).name for s in staged.segments()]
    checkpoint = tmp_path / "checkpoint"
    for entry, name in enumerate(names):
        write_log(checkpoint / "sources" / "0", str(entry), {entry: [name]})
    for batch, offset in enumerate([0, 1, 3, 4]):
        write_offsets(checkpoint, batch, offset, None)
    taken = logged_files(checkpoint, 0)

    def rows_read(batch: int) -> list[tuple[int, int]]:
        segments = batch_segments(taken, read_up_to(checkpoint, 0, batch - 1), read_up_to(checkpoint, 0, batch), staged)
        return [(s["first_seq"], s["rows"]) for s in segments]

    assert [rows_read(b) for b in range(4)] == [[(0, 2)], [(2, 2)], [(4, 2), (6, 2)], [(8, 2)]]
    assert consumed_rows(taken, read_up_to(checkpoint, 0, 2), staged) == 8
    assert read_up_to(checkpoint, 1, 3) == -1  # the second source has nothing yet
