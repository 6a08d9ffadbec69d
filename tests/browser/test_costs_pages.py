"""The finance pages in a real browser: report with its Plotly charts, filters, drill-down to
hosts and days, CSV download parsed back, the printed view, and the empty state.

Data: ``tests.costs.test_pages.cost_fleet`` (its docstring works the figures out by hand).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.costs import test_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The hand-worked fleet of the page tests.
fleet = test_pages.cost_fleet


def _left_loopback(urls: list[str]) -> list[str]:
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in {"data", "blob", "about"} and urlsplit(url).hostname != "127.0.0.1"
    ]


def test_it_opens_filters_and_drills_down_the_report(
    page: Any, login: Any, screenshot: Any, finance: Any, other_lead: Any, fleet: dict[str, Any]
) -> None:
    login(page, finance)
    page.goto("/costs/?month=2026-10")
    page.wait_for_selector("#spend-chart .main-svg")
    page.wait_for_selector("#treemap-chart .main-svg")
    assert page.locator('[data-kpi="spend"]').inner_text().startswith("4,799.36")
    assert page.locator('[data-kpi="idle"]').inner_text() == "1,179.84"
    assert page.locator("#stale-notice").is_visible()
    # Axis titles carry units; one bar trace per team.
    assert "Spend (USD/day)" in page.locator("#spend-chart").inner_text()
    assert page.locator("#spend-chart .trace.bars").count() == 2
    screenshot(page, "costs-report")

    # Filter by provider through the form.
    page.select_option("#id_provider", "aws")
    with page.expect_navigation():
        page.click("#cost-filters button[type=submit]")
    assert parse_qs(urlsplit(page.url).query)["provider"] == ["aws"]
    assert page.locator('[data-kpi="spend"]').inner_text().startswith("4,749.36")
    assert page.locator('table[data-table="by_team"] tbody tr').count() == 1
    page.wait_for_selector("#spend-chart .main-svg")

    # Drill from the team's total to its hosts, then to the host's days.
    with page.expect_navigation():
        page.locator('table[data-table="by_team"] tbody tr').first.locator("a.drill").click()
    assert urlsplit(page.url).path == "/costs/drill/"
    hosts = page.locator('table[data-table="hosts"] tbody tr')
    assert hosts.count() == 1
    assert "gpu-a" in hosts.first.inner_text()
    with page.expect_navigation():
        hosts.first.locator("a.drill").click()
    days = page.locator('table[data-table="days"] tbody tr')
    assert days.count() == 2
    assert "2,374.68" in days.first.inner_text()
    prices = page.locator('table[data-table="prices"]').inner_text()
    assert "skypilot-catalog aws/vms.csv" in prices
    assert "utility tariff 2026" in prices
    screenshot(page, "costs-drill-days")

    # Download the days as CSV and read it back.
    with page.expect_download() as download_info:
        page.click('[data-download="csv-days"]')
    download = download_info.value
    assert download.suggested_filename == "costs-2026-10-drill-days.csv"
    text = Path(download.path()).read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(row["Day (UTC)"], row["Host"]) for row in rows] == [
        ("2026-10-01", "gpu-a"),
        ("2026-10-02", "gpu-a"),
    ]
    assert all(float(row["Spend"]) == pytest.approx(2374.68) for row in rows)
    assert {row["Price source"] for row in rows} == {"skypilot-catalog aws/vms.csv"}

    assert page.js_errors == []
    assert _left_loopback(page.network) == []


def test_it_prints_the_report_without_the_page_chrome(
    page: Any, login: Any, screenshot: Any, finance: Any, fleet: dict[str, Any]
) -> None:
    login(page, finance)
    page.goto("/costs/?month=2026-10")
    page.wait_for_selector("#treemap-chart .main-svg")
    page.emulate_media(media="print")
    assert not page.locator(".topbar").is_visible()
    assert not page.locator("#cost-filters").is_visible()
    assert page.locator('table[data-table="by_team"]').is_visible()
    screenshot(page, "costs-report-print")


def test_it_tells_an_outsider_why_there_is_nothing(
    page: Any, login: Any, screenshot: Any, outsider: Any, fleet: dict[str, Any]
) -> None:
    login(page, outsider)
    page.goto("/costs/?month=2026-10")
    assert "You are not in a team yet" in page.locator(".card.empty").inner_text()
    assert page.locator("#spend-chart").count() == 0
    screenshot(page, "costs-report-outsider")
