import json
import os

import pyarrow.parquet as pq
import pytest

from jobs.changelog import formats, live, staging
from jobs.changelog.quarantine import read_quarantine
from jobs.changelog.segments import PENDING, SEGMENTS
from jobs.changelog.staging import StagedChangelog, stage_source
from jobs.errors import InputError
from jobs.spec.model import SourceSpec, StreamSpec
from tests.conftest import change, write_changelog


def source(tmp_path, on_bad_rows="fail", key=("order_id",)):
    return SourceSpec(
        path=tmp_path / "orders",
        format="changelog-json",
        schema="order_id BIGINT, pId BIGINT, income BIGINT",
        primary_key=key,
        on_bad_rows=on_bad_rows,
    )


def stage(tmp_path, spec, rows_per_batch=2):
    result, commit = stage_source(
        "orders",
        spec,
        tmp_path / "staged",
        tmp_path / "quarantine",
        batch_size=StreamSpec(rows_per_batch=rows_per_batch),
    )
    commit()
    return result


def test_rows_are_numbered_across_files_in_name_order_and_later_runs_stage_only_new_files(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "b.json", [change("+I", 2, 1, 5)])
    write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    first = stage(tmp_path, spec)
    assert (first.new_files, first.total_rows) == (["a.json", "b.json"], 2)
    write_changelog(tmp_path / "orders", "c.json", [change("-D", 1, 1, 5), change("+I", 3, 2, 1)])
    second = stage(tmp_path, spec)
    assert (second.new_files, second.new_rows, second.total_rows) == (["c.json"], 2, 4)
    staged = StagedChangelog(tmp_path / "staged")
    rows = staged.read(0, 4)
    assert rows.column("__seq").to_pylist() == [0, 1, 2, 3]
    assert rows.column("order_id").to_pylist() == [1, 2, 1, 3]
    assert staged.read(1, 3).column("__seq").to_pylist() == [1, 2]
    assert stage(tmp_path, spec).new_rows == 0


def test_a_bad_row_fails_the_whole_staging_and_writes_nothing(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    stage(tmp_path, spec)
    before = sorted(os.listdir(tmp_path / "staged"))
    write_changelog(tmp_path / "orders", "b.json", [change("+I", 2, 1, 5), change("-D", 9, 1, 5)])
    with pytest.raises(InputError, match=r"b.json:2: -D for key \(order_id=9\), which was never inserted"):
        stage_source(
            "orders", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(rows_per_batch=2)
        )
    assert sorted(os.listdir(tmp_path / "staged")) == before
    assert json.loads((tmp_path / "staged" / "manifest.json").read_text())["rows"] == 1


def test_quarantine_sets_bad_rows_aside_counts_them_and_keeps_the_rest(tmp_path):
    spec = source(tmp_path, on_bad_rows="quarantine")
    folder = tmp_path / "orders"
    write_changelog(folder, "a.json", [change("+I", 1, 1, 5), change("-D", 9, 1, 5)])
    with open(folder / "a.json", "a") as f:
        f.write('{"order_id": 3, "op": "??"}\n')
    result = stage(tmp_path, spec)
    assert result.total_rows == 1
    assert [(q.line, q.reason.split(" ")[0]) for q in result.quarantined] == [(2, "-D"), (3, "unknown")]
    table = read_quarantine(tmp_path / "quarantine")
    assert table.column("line").to_pylist() == [2, 3]
    assert table.column("raw").to_pylist()[1] == '{"order_id": 3, "op": "??"}'


def test_keep_stages_protocol_breaking_rows_as_anomalies_and_quarantines_malformed_ones(tmp_path):
    spec = source(tmp_path, on_bad_rows="keep")
    folder = tmp_path / "orders"
    write_changelog(
        folder, "a.json", [change("+I", 1, 1, 5), change("-D", 9, 1, 5), change("+U", 1, 1, 7), change("-D", 1, 1, 7)]
    )
    with open(folder / "a.json", "a") as f:
        f.write('{"order_id": 3, "op": "??"}\n')
    result, commit = stage_source(
        "orders",
        spec,
        tmp_path / "staged",
        tmp_path / "quarantine",
        batch_size=StreamSpec(rows_per_batch=2),
        anomalies=tmp_path / "anomalies",
    )
    commit()
    # The ghost -D and the +U without its -U stay in the changelog; the last -D retracts the
    # row as a table would hold it after the +U (order 1 at income 7), so it is valid.
    assert result.total_rows == 4
    assert [(a.line, a.reason.split(" ")[0]) for a in result.anomalies] == [(2, "-D"), (3, "+U")]
    assert [q.line for q in result.quarantined] == [5]
    anomalies = read_quarantine(tmp_path / "anomalies")
    assert anomalies.column("line").to_pylist() == [2, 3]
    assert '"op": "+U"' in anomalies.column("raw").to_pylist()[1]
    assert StagedChangelog(tmp_path / "staged").read(0, 4).column("order_id").to_pylist() == [1, 9, 1, 1]


def test_a_consumed_file_that_changes_is_refused(tmp_path):
    spec = source(tmp_path)
    path = write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    stage(tmp_path, spec)
    path.write_text(path.read_text() + json.dumps(change("+I", 2, 1, 5)) + "\n")
    with pytest.raises(InputError, match="changed after an earlier run consumed it"):
        stage(tmp_path, spec)


def test_a_consumed_file_touched_but_unchanged_is_not_new_and_a_same_size_edit_is_refused(tmp_path):
    spec = source(tmp_path)
    path = write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    stage(tmp_path, spec)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert stage(tmp_path, spec).new_rows == 0
    path.write_text(path.read_text().replace('"income": 5', '"income": 6'))
    with pytest.raises(InputError, match="changed after an earlier run consumed it.*lockstep rebuild"):
        stage(tmp_path, spec)


def test_retraction_checks_continue_across_staging_runs(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    stage(tmp_path, spec)
    write_changelog(tmp_path / "orders", "b.json", [change("-U", 1, 1, 5), change("+U", 1, 2, 6)])
    assert stage(tmp_path, spec).new_rows == 2
    write_changelog(tmp_path / "orders", "c.json", [change("-D", 1, 1, 5)])
    with pytest.raises(InputError, match="does not match its live row"):
        stage(tmp_path, spec)


def test_hidden_files_are_not_changelog_files(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5)])
    (tmp_path / "orders" / "_SUCCESS").write_text("")
    (tmp_path / "orders" / ".a.json.crc").write_text("x")
    assert stage(tmp_path, spec).new_files == ["a.json"]


def test_segments_are_micro_batches_that_never_split_an_update_and_sort_by_mtime(tmp_path):
    spec = source(tmp_path)
    write_changelog(
        tmp_path / "orders",
        "a.json",
        [
            change("+I", 1, 1, 5),
            change("+I", 2, 1, 5),
            change("-U", 1, 1, 5),
            change("+U", 1, 1, 6),
            change("+I", 3, 1, 5),
            change("-D", 3, 1, 5),
        ],
    )
    stage(tmp_path, spec, rows_per_batch=3)
    write_changelog(tmp_path / "orders", "b.json", [change("+I", 4, 1, 5)])
    stage(tmp_path, spec, rows_per_batch=3)
    staged = StagedChangelog(tmp_path / "staged")
    assert [(s["first_seq"], s["rows"]) for s in staged.segments()] == [(0, 4), (4, 2), (6, 1)]
    files = [tmp_path / "staged" / s["file"] for s in staged.segments()]
    mtimes = [f.stat().st_mtime for f in files]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == 3


def test_without_a_row_count_segments_are_cut_by_size(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "a.json", [change("+I", n, n % 7, n) for n in range(40_000)])
    result, commit = stage_source(
        "orders", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(megabytes_per_batch=1)
    )
    commit()
    sizes = [s["rows"] for s in StagedChangelog(tmp_path / "staged").segments()]
    assert sum(sizes) == result.new_rows == 40_000
    assert len(sizes) > 1 and len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]
    assert StreamSpec(megabytes_per_batch=64).rows_for(rows=3000, nbytes=3000 * 100) == 64 * 2**20 // 100
    assert StreamSpec(rows_per_batch=7).rows_for(rows=3000, nbytes=1) == 7


def _partitioned(tmp_path):
    spec = SourceSpec(
        path=tmp_path / "orders",
        format="changelog-json",
        partitioned_by="date",
        schema="order_id BIGINT, pId BIGINT, income BIGINT",
        primary_key=("order_id",),
    )
    for day, rows in (
        ("2026-11-19", [change("+I", 1, 1, 5)]),
        ("2026-11-20", [change("+I", 2, 1, 3)]),
        ("2026-11-21", [change("-D", 1, 1, 5)]),
    ):
        write_changelog(tmp_path / "orders" / f"date={day}", "part-0.json", rows)
    return spec


def _stage_until(tmp_path, spec, until):
    result, commit = stage_source(
        "orders",
        spec,
        tmp_path / "staged",
        tmp_path / "quarantine",
        batch_size=StreamSpec(rows_per_batch=2),
        until=until,
    )
    commit()
    return result


def test_a_partitioned_source_stages_the_partitions_up_to_the_logical_date(tmp_path):
    from datetime import date

    spec = _partitioned(tmp_path)
    assert _stage_until(tmp_path, spec, date(2026, 11, 20)).new_files == [
        "date=2026-11-19/part-0.json",
        "date=2026-11-20/part-0.json",
    ]
    assert _stage_until(tmp_path, spec, date(2026, 11, 20)).new_files == []
    assert _stage_until(tmp_path, spec, None).new_files == ["date=2026-11-21/part-0.json"]


def test_a_file_outside_the_partitions_or_behind_them_is_refused_with_its_path(tmp_path):
    from datetime import date

    spec = _partitioned(tmp_path)
    _stage_until(tmp_path, spec, date(2026, 11, 20))
    late = write_changelog(tmp_path / "orders" / "date=2026-11-19", "part-1.json", [change("+I", 3, 2, 1)])
    with pytest.raises(InputError, match="older than date=2026-11-20") as info:
        _stage_until(tmp_path, spec, date(2026, 11, 21))
    assert info.value.where == str(late)
    late.unlink()
    stray = write_changelog(tmp_path / "orders", "loose.json", [change("+I", 3, 2, 1)])
    with pytest.raises(InputError, match="date=YYYY-MM-DD folders") as info:
        _stage_until(tmp_path, spec, date(2026, 11, 21))
    assert info.value.where == str(stray)


def test_a_new_file_that_sorts_before_a_consumed_one_is_refused_with_its_name(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "002.json", [change("+I", 2, 1, 5)])
    stage(tmp_path, spec)
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 5)])
    with pytest.raises(InputError, match="001.json: new file sorts before 002.json, which an earlier run"):
        stage(tmp_path, spec)
    write_changelog(tmp_path / "orders", "003.json", [change("+I", 3, 1, 5)])
    (tmp_path / "orders" / "001.json").unlink()
    assert stage(tmp_path, spec).new_files == ["003.json"]  # the rule: after every consumed file


def _updates(orders: int, first: int = 0) -> list[dict]:
    """Inserts, each followed by an update (-U, +U): cuts must never fall between the two."""
    rows = []
    for n in range(first, first + orders):
        rows += [change("+I", n, n % 5, n), change("-U", n, n % 5, n), change("+U", n, n % 5, n + 1)]
    return rows


def _segments(folder) -> list[tuple[int, int, list]]:
    staged = StagedChangelog(folder)
    return [(s["first_seq"], s["rows"], pq.read_table(folder / s["file"]).to_pylist()) for s in staged.segments()]


def test_a_file_staged_a_small_block_at_a_time_gives_the_segments_of_one_parse(tmp_path, monkeypatch):
    whole, blocks = tmp_path / "whole", tmp_path / "blocks"
    for folder in (whole, blocks):
        write_changelog(folder / "orders", "a.json", _updates(40))
        write_changelog(folder / "orders", "b.json", _updates(7, first=40))
    stage(whole, source(whole), rows_per_batch=4)
    monkeypatch.setattr(formats, "BLOCK_BYTES", 150)  # two or three lines a block
    monkeypatch.setattr(staging, "CHECK_ROWS", 5)  # checked and handed on two blocks or so at a time
    stage(blocks, source(blocks), rows_per_batch=4)
    cut = _segments(whole / "staged")
    assert cut == _segments(blocks / "staged")
    assert sum(rows for _, rows, _ in cut) == 141 and len(cut) > 20
    assert all(content[-1]["__kind"] != 1 for _, _, content in cut)  # no segment ends after a -U


def test_a_bad_row_in_a_later_block_leaves_no_segment_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "BLOCK_BYTES", 150)
    write_changelog(tmp_path / "orders", "a.json", _updates(20) + [{"order_id": 99, "op": "+X"}])
    with pytest.raises(InputError, match="a.json:61"):
        stage(tmp_path, source(tmp_path), rows_per_batch=4)
    assert not (tmp_path / "staged" / PENDING).exists()
    assert not list((tmp_path / "staged").rglob("*.parquet"))


def test_what_a_crashed_staging_left_is_cleared_by_the_next(tmp_path):
    spec = source(tmp_path)
    write_changelog(tmp_path / "orders", "a.json", _updates(3))
    stage(tmp_path, spec)
    listed = sorted(p.name for p in (tmp_path / "staged" / SEGMENTS).iterdir())
    # A crash mid-commit: a segment moved but not listed; another still pending.
    (tmp_path / "staged" / SEGMENTS / "seg-000000000900.parquet").write_bytes(b"unlisted")
    (tmp_path / "staged" / PENDING).mkdir()
    (tmp_path / "staged" / PENDING / "seg-000000000901.parquet").write_bytes(b"pending")
    write_changelog(tmp_path / "orders", "b.json", [change("+I", 7, 1, 1)])
    assert stage(tmp_path, spec).new_rows == 1
    assert not (tmp_path / "staged" / PENDING).exists()
    names = sorted(p.name for p in (tmp_path / "staged" / SEGMENTS).iterdir())
    assert names[: len(listed)] == listed and "seg-000000000900.parquet" not in names
    assert names == sorted(s["file"].split("/")[-1] for s in StagedChangelog(tmp_path / "staged").segments())


def test_a_state_past_its_part_size_is_staged_in_parts_with_the_same_rows_and_errors(tmp_path, monkeypatch):
    whole, split = tmp_path / "whole", tmp_path / "split"
    for folder in (whole, split):
        write_changelog(folder / "orders", "a.json", [change("+I", n, n % 3, 5) for n in range(12)])
    stage(whole, source(whole))
    monkeypatch.setattr(live, "PART_ROWS", 2)
    stage(split, source(split))
    manifest = json.loads((split / "staged" / "manifest.json").read_text())
    assert manifest["live_state"] == "live-000001" and (split / "staged" / "live-000001").is_dir()
    later = [change("-U", 4, 1, 5), change("+U", 4, 2, 6), change("-D", 7, 1, 5), change("+I", 20, 1, 1)]
    for folder in (whole, split):
        write_changelog(folder / "orders", "b.json", later)
    stage(whole, source(whole))
    stage(split, source(split))
    read = [StagedChangelog(folder / "staged").read(0, 16).drop_columns(["__file"]) for folder in (whole, split)]
    assert read[0].equals(read[1])
    assert sorted(p.name for p in (split / "staged").iterdir() if p.name.startswith("live")) == ["live-000002"]
    for folder in (whole, split):  # 7 was deleted in b.json: deleting it again names the line
        write_changelog(folder / "orders", "c.json", [change("+I", 21, 0, 1), change("-D", 7, 1, 5)])
    for folder in (whole, split):
        with pytest.raises(InputError, match=r"c.json:2: -D for key \(order_id=7\), which was never inserted"):
            stage(folder, source(folder))
    assert not (split / "staged" / staging.LIVE_PENDING).exists()
    assert (split / "staged" / "live-000002").is_dir()  # the committed state, untouched


def test_a_prepared_run_changes_nothing_until_its_commit_and_a_later_run_clears_it(tmp_path):
    """Staging writes the next generation beside the committed one; the commit (which needs
    nothing the staging process held) makes it current; a prepared run never committed is
    replaced by the next run, as if it had not happened."""
    spec = source(tmp_path, on_bad_rows="quarantine")
    write_changelog(tmp_path / "orders", "a.json", [change("+I", 1, 1, 5), change("-D", 9, 1, 1)])
    stage(tmp_path, spec)
    write_changelog(tmp_path / "orders", "b.json", [change("+I", 2, 1, 5), change("-D", 8, 1, 1)])
    before = (tmp_path / "staged" / "manifest.json").read_text()
    stage_source("orders", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(rows_per_batch=2))
    assert (tmp_path / "staged" / "manifest.json").read_text() == before  # prepared, not committed
    assert (tmp_path / "staged" / "live-000002.parquet").exists()
    assert read_quarantine(tmp_path / "quarantine").num_rows == 1
    _, commit = stage_source(
        "orders", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(rows_per_batch=2)
    )
    staging.commit_staged(tmp_path / "staged", tmp_path / "quarantine", None)  # what commit() does
    manifest = json.loads((tmp_path / "staged" / "manifest.json").read_text())
    assert (manifest["generation"], manifest["rows"], manifest["quarantined"]) == (2, 2, 2)
    assert sorted(p.name for p in (tmp_path / "staged").iterdir() if p.name.startswith("live")) == [
        "live-000002.parquet"
    ]
    assert sorted(r["file"] for r in read_quarantine(tmp_path / "quarantine").to_pylist()) == ["a.json", "b.json"]
    commit()  # a second commit of the same run finds nothing prepared
    assert json.loads((tmp_path / "staged" / "manifest.json").read_text()) == manifest
