"""publish(), rebuild(), the index page and `lockstep report`, on synthetic reports in tmp_path."""

from __future__ import annotations

import json

import pytest

from expectations.report import publish, rebuild, render_index
from jobs.cli.main import main
from jobs.errors import RunStateError


@pytest.fixture
def runs(tmp_path, failing, old_passing):
    """One query with two checks (an older passing one, then the failing one)."""
    runs = tmp_path / "runs"
    query_dir = runs / failing["query"]
    publish(old_passing, query_dir)
    publish(failing, query_dir)
    return runs


def test_publish_writes_latest_history_and_index(tmp_path, failing):
    query_dir = tmp_path / "runs" / "orders_per_product"
    page = publish(failing, query_dir)
    assert page == query_dir / "report.html"
    archive = query_dir / "history" / "20261122T181329Z"
    for folder in (query_dir, archive):
        assert json.loads((folder / "report.json").read_text()) == failing
        assert 'id="verdict">FAIL<' in (folder / "report.html").read_text()
    assert (tmp_path / "runs" / "index.html").is_file()
    assert not list(tmp_path.rglob("*.tmp"))


def test_links_are_relative_to_each_page(runs):
    latest = (runs / "orders_per_product" / "report.html").read_text()
    archived = (runs / "orders_per_product" / "history" / "20261122T181329Z" / "report.html").read_text()
    docs = "gx/uncommitted/data_docs/local_site/index.html"
    assert f'href="{docs}"' in latest and 'href="../index.html"' in latest
    assert f'href="../../{docs}"' in archived and 'href="../../../index.html"' in archived


def test_the_index_lists_the_latest_run_and_the_history_newest_first(runs):
    index = (runs / "index.html").read_text()
    assert 'href="orders_per_product/report.html"' in index
    runs_listed = [
        index.index(f'href="orders_per_product/history/{run}/report.html"')
        for run in ("20261122T181329Z", "20261121T090000Z")
    ]
    assert runs_listed == sorted(runs_listed)
    assert "&lt;b&gt;bold&lt;/b&gt;" in index and "<b>bold" not in index
    assert index == render_index(runs)


def test_the_index_shows_unexplained_rows_when_the_report_has_a_diagnosis(runs, tmp_path, old_passing):
    assert "<td>2</td>" in (runs / "index.html").read_text()
    publish(old_passing, tmp_path / "other" / "q")
    assert "<td>—</td>" in render_index(tmp_path / "other")


def test_rebuild_rerenders_every_page_and_the_index(runs):
    query_dir = runs / "orders_per_product"
    for page in [query_dir / "report.html", *query_dir.glob("history/*/report.html"), runs / "index.html"]:
        page.write_text("stale")
    pages = rebuild(runs)
    assert len(pages) == 4 and pages[-1] == runs / "index.html"
    assert all(page.read_text() != "stale" for page in pages)


def test_a_corrupt_report_json_is_one_error_naming_the_file(runs):
    corrupt = runs / "orders_per_product" / "history" / "20261121T090000Z" / "report.json"
    corrupt.write_text('{"query": ')
    with pytest.raises(RunStateError) as raised:
        rebuild(runs)
    assert raised.value.where == str(corrupt)
    assert str(corrupt) in str(raised.value)


def test_a_missing_runs_folder_is_an_error(tmp_path):
    with pytest.raises(RunStateError, match="no such runs folder"):
        rebuild(tmp_path / "nowhere")


def test_lockstep_report_rebuilds_and_prints_the_index(runs, capsys):
    assert main(["report", str(runs)]) == 0
    assert capsys.readouterr().out.strip() == f"{runs / 'index.html'} (3 report pages and the index)"


def test_lockstep_report_on_a_missing_folder_exits_2_naming_it(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "nowhere") in err[0]


def test_a_broken_report_of_another_query_does_not_stop_a_check_publishing(runs, failing):
    other = runs / "other_query" / "report.json"
    other.parent.mkdir()
    other.write_text("{broken")
    publish({**failing, "checked_at": "2026-11-22T19:00:00Z"}, runs / failing["query"])
    index = (runs / "index.html").read_text()
    assert "other_query" in index and "cannot read the report" in index
    assert (runs / failing["query"] / "history" / "20261122T190000Z" / "report.html").is_file()


def test_a_run_that_ended_before_a_verdict_is_an_error_with_its_reason(tmp_path, failing):
    from expectations.report.publish import publish_error

    runs = tmp_path / "runs"
    publish(failing, runs / failing["query"])
    publish_error("broken", "", runs / "broken", "q.yaml:3: unknown column 'incme'")
    page = (runs / "broken" / "report.html").read_text()
    assert 'id="verdict">ERROR<' in page and "unknown column &#39;incme&#39;" in page
    index = (runs / "index.html").read_text()
    assert '<span class="badge error">ERROR</span>' in index
    reasons = index.split('class="reason">')[1:]
    assert reasons[0].startswith("q.yaml:3: unknown column")  # broken sorts first
    assert reasons[1].split("<")[0].strip() != ""  # the failing query's reason: its diagnosis
