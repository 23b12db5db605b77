"""The published report as a person sees it: headless Chromium opens the page and the index.

Chromium and chromedriver are Debian packages that scripts/setup.sh installs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from expectations.report import publish
from tests.report.conftest import FAILING, OLD_PASSING, SCRIPT

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "needs chromium and chromium-driver: scripts/setup.sh (make test) installs them"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    publish(OLD_PASSING, runs / FAILING["query"])
    return publish(FAILING, runs / FAILING["query"])


def test_the_failing_report_reads_as_it_should(browser, published, tmp_path):
    browser.get(published.as_uri())
    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000

    assert browser.find_element(By.ID, "verdict").text == "FAIL"
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2
    assert all(chart.size["width"] > 0 and chart.size["height"] > 0 for chart in charts)


def test_the_mismatched_row_has_its_differing_cell_marked(browser, published):
    browser.get(published.as_uri())
    row = browser.find_element(By.CSS_SELECTOR, "#mismatched tbody tr")
    assert [cell.text for cell in row.find_elements(By.TAG_NAME, "td")] == ["1", "7≠", "8", "2", "2"]
    assert [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "td.differs")] == ["7≠", "8"]


def test_a_script_in_the_data_is_text_not_code(browser, published):
    browser.get(published.as_uri())
    shown = browser.find_elements(By.XPATH, f"//td[contains(., '{SCRIPT}')]")
    assert shown and shown[0].is_displayed()
    with pytest.raises(NoAlertPresentException):
        _ = browser.switch_to.alert
    assert browser.find_elements(By.TAG_NAME, "script") == []


def test_the_index_links_to_the_reports(browser, published):
    browser.get((published.parent.parent / "index.html").as_uri())
    history = [link.get_attribute("href") for link in browser.find_elements(By.CSS_SELECTOR, "a.history-link")]
    assert len(history) == 2
    browser.find_element(By.CSS_SELECTOR, "a.report-link").click()
    assert browser.current_url == published.as_uri()
    assert browser.find_element(By.ID, "verdict").text == "FAIL"
    browser.get(history[-1])  # the oldest run: the passing one
    assert browser.find_element(By.ID, "verdict").text == "PASS"
    browser.find_element(By.ID, "index-link").click()
    assert browser.current_url.endswith("/index.html")


def test_late_events_are_rows_on_the_page_and_times_read_in_utc(browser, published):
    browser.get(published.as_uri())
    late = browser.find_element(By.ID, "late-events")
    row = late.find_element(By.CSS_SELECTOR, "tbody tr")
    assert [cell.text for cell in row.find_elements(By.TAG_NAME, "td")][:3] == [
        "2026-11-25 09:00:00 UTC",
        "2026-11-25 09:01:00 UTC",
        "+I",
    ]
    assert "the first 1 of 10" in late.text and "late_events/" in late.text
    point = browser.find_element(By.ID, "run").text
    assert "2026-11-25 10:01:00 UTC" in point and "1795600860000000" not in point


def test_the_index_gives_the_reason_of_a_failing_run(browser, published):
    browser.get((published.parent.parent / "index.html").as_uri())
    reason = browser.find_element(By.CSS_SELECTOR, "td.reason").text
    assert reason == FAILING["diagnosis"]["summary"]  # "12 rows differ: 10 explained by late events, ..."


HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"


@pytest.fixture(scope="module")
def data_docs(spark, tmp_path_factory) -> Path:
    """A real check whose data holds markup, failing so that its rows reach the results."""
    from deltalake import DeltaTable

    from jobs.pipeline import Pipeline
    from tests.conftest import write_changelog, write_spec

    folder = tmp_path_factory.mktemp("docs")
    write_changelog(folder / "orders", "001.json", [{"order_id": 1, "pId": 1, "note": HOSTILE, "op": "+I"}])
    spec = write_spec(
        folder,
        """
        name: q
        sql: SELECT pId, MAX(note) AS note FROM orders GROUP BY pId
        sources:
          orders: {path: orders, format: changelog-json, schema: "order_id BIGINT, pId BIGINT, note STRING",
                   primary_key: [order_id]}
        """,
    )
    pipeline = Pipeline.open(spec, runs_dir=folder / "runs")
    pipeline.stream()
    pipeline.batch()
    DeltaTable(str(pipeline.layout.batch)).update(updates={"note": f"'{HOSTILE}x'"})
    assert pipeline.check().verdict == "fail"
    return pipeline.layout.gx / "uncommitted" / "data_docs" / "local_site"


@pytest.mark.slow
def test_markup_in_the_data_runs_no_script_in_the_data_docs(browser, data_docs):
    browser.set_page_load_timeout(30)
    pages = [data_docs / "index.html"] + sorted(data_docs.glob("validations/**/*.html"))
    assert len(pages) > 3
    for page in pages:
        browser.get(page.as_uri())
        with pytest.raises(NoAlertPresentException):
            _ = browser.switch_to.alert
