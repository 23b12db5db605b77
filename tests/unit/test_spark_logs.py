"""Unplanned finds: file-source log entries past the newest micro-batch's offset are emptied (a
segment Spark found just before a kill is found again, alone), whether the entry is a plain file or
the compact file that also holds every earlier entry; planned entries are left as they are."""

from __future__ import annotations

from jobs.stream.offsets import logged_files
from jobs.stream.spark_logs import forget_unplanned_finds
from tests.unit.test_offsets import segment, spark_like_log, write_log, write_offsets


def test_an_unplanned_entry_in_a_compact_file_is_dropped_and_the_earlier_ones_kept(tmp_path):
    folder = spark_like_log(tmp_path, 10, keep_old=False)  # entries 0..9, 9.compact
    (folder / ".9.compact.crc").write_text("checksum")
    for batch in range(9):
        write_offsets(tmp_path, batch, batch)
    assert forget_unplanned_finds(tmp_path) == 1
    assert logged_files(tmp_path, 0) == {b: {segment(b)} for b in range(9)}
    assert not (folder / ".9.compact.crc").exists()  # Hadoop would refuse the rewritten file
    assert forget_unplanned_finds(tmp_path) == 0


def test_each_source_keeps_what_the_newest_offset_planned_of_it(tmp_path):
    first, second = tmp_path / "sources" / "0", tmp_path / "sources" / "1"
    for entry in range(3):
        write_log(first, str(entry), {entry: [segment(entry)]})
    write_log(second, "0", {0: [segment(100)]})
    write_offsets(tmp_path, 0, 0, None)
    write_offsets(tmp_path, 1, 1, None)  # entry 2 of the first source and the second's entry 0: unplanned
    assert forget_unplanned_finds(tmp_path) == 2
    assert logged_files(tmp_path, 0) == {0: {segment(0)}, 1: {segment(1)}}
    assert logged_files(tmp_path, 1) == {}
    assert (first / "2").read_text().splitlines() == ["v1"]  # still there: Spark checks entries are contiguous


def test_nothing_is_forgotten_when_every_find_was_planned(tmp_path):
    spark_like_log(tmp_path, 3, keep_old=True)
    write_offsets(tmp_path, 0, 0)
    write_offsets(tmp_path, 1, 2)  # a micro-batch that read two entries
    assert forget_unplanned_finds(tmp_path) == 0
    assert set(logged_files(tmp_path, 0)) == {0, 1, 2}
