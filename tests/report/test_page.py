"""render_page on synthetic reports: escaping, the diff's marked cells, charts, no network, old reports."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from expectations.report import render_page
from expectations.report.page import _charts

DOCS = "gx/uncommitted/data_docs/local_site/index.html"


class _Cells(HTMLParser):
    """(class attribute, text) of every <td> inside the table with the given id."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.depth, self.cells, self._cell = table_id, 0, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and (self.depth or attrs.get("id") == self.table_id):
            self.depth += 1
        elif tag == "td" and self.depth:
            self._cell = [attrs.get("class") or "", ""]

    def handle_endtag(self, tag):
        if tag == "table" and self.depth:
            self.depth -= 1
        elif tag == "td" and self._cell is not None:
            self.cells.append(tuple(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


def cells(html: str, table_id: str) -> list[tuple[str, str]]:
    parser = _Cells(table_id)
    parser.feed(html)
    return parser.cells


def page(report: dict) -> str:
    return render_page(report, data_docs_href=DOCS)


def test_the_verdict_and_its_explanation_come_first(failing):
    html = page(failing)
    assert re.search(r'<div class="verdict fail" id="verdict">FAIL</div>', html)
    assert "12 rows differ: 10 explained by late events, 2 unexplained" in html
    assert html.index('id="verdict"') < html.index('id="diagnosis"') < html.index('id="rows"')


def test_the_check_explanation_wins_over_the_diagnosis_summary(failing):
    failing["explanation"] = "Stream and batch disagree on 3 rows."
    assert "Stream and batch disagree on 3 rows." in page(failing)


def test_warnings_show_in_a_warning_box(failing):
    html = page(failing)
    box = html[html.index('id="warnings"') :]
    assert "non-deterministic function rand() at conf/queries/q.yaml line 3" in box[: box.index("</section>")]


def test_values_from_data_are_escaped(failing):
    html = page(failing)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html
    assert "income per product, &lt;b&gt;bold&lt;/b&gt; on purpose" in html
    assert "<b>bold" not in html


def test_only_the_differing_cells_of_a_mismatched_row_are_marked(failing):
    row = cells(page(failing), "mismatched")
    # pId | income: stream, batch | n: stream, batch
    assert [text for _, text in row] == ["1", "7≠", "8", "2", "2"]
    marked = [text for css, text in row if "differs" in css.split()]
    assert marked == ["7≠", "8"]


def test_without_a_list_of_differing_columns_any_inequality_is_marked(failing):
    del failing["differences"]["mismatched"][0]["differing"]
    failing["differences"]["mismatched"][0]["batch"]["n"] = 3
    marked = [text for css, text in cells(page(failing), "mismatched") if "differs" in css]
    assert marked == ["7≠", "8", "2≠", "3"]


def test_missing_and_extra_samples_are_tables_keyed_first(failing):
    html = page(failing)
    assert "Missing from the stream" in html and "Extra in the stream" in html
    assert re.search(
        r'<table class="data missing">\s*<thead><tr><th class="key">pId</th><th>income</th><th>n</th>', html
    )


def test_the_unexplained_cause_is_first_and_highlighted(failing):
    html = page(failing)
    causes = re.findall(r'<tr class="cause( unexplained)?" data-cause="(\w+)">', html)
    assert causes == [(" unexplained", "unexplained"), ("", "late_events")]


def test_no_unexplained_rows_no_highlight(failing):
    failing["diagnosis"]["causes"][1]["rows"] = 0
    causes = re.findall(r'<tr class="cause( unexplained)?" data-cause="(\w+)">', page(failing))
    assert causes == [("", "late_events"), ("", "unexplained")]


def test_two_inline_svg_charts(failing):
    html = page(failing)
    assert re.findall(r'<svg class="chart" data-chart="(\w+)"', html) == ["changelog", "state"]
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html and "<metadata>" not in html
    for title in (
        "Output changelog per micro-batch",
        "State size and duration per micro-batch",
        "micro-batch",
        "state rows",
        "seconds",
        "+I",
        "-D",
    ):
        assert f">{title}<" in html or title in html


def test_no_micro_batches_says_so_instead_of_charts(failing):
    failing["micro_batches"] = []
    html = page(failing)
    assert "<svg" not in html
    assert 'id="no-micro-batches"' in html


def test_nothing_is_loaded_from_the_network(failing):
    html = page(failing)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import|<link\b|<img\b|<iframe\b", html, re.IGNORECASE)
    # The charts' <use xlink:href="#m..."> point inside the page.
    assert [href for href in re.findall(r'href="([^"]*)"', html) if not href.startswith("#")] == [DOCS]


def test_the_same_report_renders_the_same_page(failing):
    first = page(failing)
    _charts.cache_clear()  # draw the charts again rather than reuse the first drawing
    assert page(failing) == first


def test_suites_are_grouped_with_samples_of_failed_expectations(failing):
    html = page(failing)
    assert re.findall(r'<table class="suite" data-suite="(\w+)">', html) == ["unity", "retraction"]
    assert "1/3 hold" in html and "1/1 hold" in html
    assert "income__stream" in html


def test_plan_stages_materializer_and_windows(failing):
    failing |= {
        "stages": [
            {
                "stage": "stage1_dedup",
                "sql": "SELECT 1",
                "stream_rows": 3,
                "batch_rows": 4,
                "missing_rows": 1,
                "extra_rows": 0,
                "agrees": False,
            }
        ],
        "first_diverging_stage": "stage1_dedup",
        "materializer": {"reasons": ["the sink is keyed by [id]"], "state_rows": 2},
        "final_watermark": "2026-11-21 09:11:55",
        "late_events": 3,
        "open_windows_not_compared": 1,
        "late_events_by_window": [
            {"window_start": "2026-11-21 09:00:00", "window_end": "2026-11-21 09:01:00", "kind": "+I", "events": 3}
        ],
        "late_explanation": {"explains": "all", "summary": "3 late events explain all of the difference"},
    }
    html = page(failing)
    assert "<pre>== orders_per_product ==\nSink(table=[orders_per_product]" in html
    assert '<tr class="diverges"><td>stage1_dedup</td>' in html
    assert "the sink is keyed by [id]" in html
    assert "3 late events explain all of the difference" in html and "2026-11-21 09:11:55" in html


def test_a_report_without_the_newer_keys_renders(old_passing):
    html = render_page(old_passing, data_docs_href=None)
    assert 'id="verdict">PASS<' in html
    assert "Stream and batch agree: 3 rows on each side; 4 of 4 expectations hold." in html
    assert 'id="diagnosis"' not in html and 'id="warnings"' not in html and 'id="plan"' not in html
    assert 'id="data-docs"' not in html


def test_a_bare_report_renders():
    html = render_page({"query": "q", "verdict": "fail"}, data_docs_href=None)
    assert 'id="verdict">FAIL<' in html and 'id="no-micro-batches"' in html
    assert "The check failed; this report does not say which expectation" in html


def test_a_stateless_query_charts_its_changelog_but_draws_no_empty_state_chart(failing):
    for batch in failing["micro_batches"]:
        batch["state_rows"] = batch["seconds"] = None
    assert re.findall(r'<svg class="chart" data-chart="(\w+)"', page(failing)) == ["changelog"]


def test_late_events_and_anomalies_are_listed_as_rows_with_the_path_of_the_full_table(failing):
    failing["listed_rows"] = {
        "late_events": {
            "table": "late_events",
            "total": 120,
            "rows": [{"window_start": "2026-11-21 09:01:00 UTC", "op": "+I", "order_id": 5}],
        },
        "anomalies": {
            "table": "anomalies",
            "total": 1,
            "rows": [{"source": "orders", "file": "002.json", "line": 7, "reason": "-D for a key never inserted"}],
        },
    }
    html = page(failing)
    late, anomalies = section(html, "late-events"), section(html, "anomalies")
    assert re.findall(r"<td[^>]*>(.*?)</td>", late) == ["2026-11-21 09:01:00 UTC", "+I", "5"]
    assert "the first 1 of 120" in late and "<code>late_events/</code>" in late
    assert "-D for a key never inserted" in anomalies and "002.json" in anomalies


def section(html: str, section_id: str) -> str:
    return html.split(f'<section id="{section_id}">')[1].split("</section>")[0]


def test_a_watermark_reads_as_a_utc_time_not_epoch_microseconds(failing):
    failing["consistency_point"]["sources"]["orders"]["watermark"] = 1_763_715_660_000_000
    html = page(failing)
    assert "2025-11-21 09:01:00 UTC" in html and "1763715660000000" not in html


def test_failed_expectations_without_row_differences_are_named(old_passing):
    old_passing["verdict"] = "fail"
    old_passing["expectations"][3]["success"] = False
    assert "but 3 of 4 expectations hold: expect_no_ghost_retractions failed." in page(old_passing)
