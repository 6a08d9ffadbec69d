"""The costs-by-workload page in a real browser: drawn with no console error, its numbers and
exports checked like every finance page's, and the idle switch keeping the total.

Data: the shared host's day of tests/attribution/conftest.py (its figures worked by hand in
tests/attribution/test_allocation_page.py): 1,032.36 USD in November 2026.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.attribution.conftest import world
from tests.browser.numbers import console_problems, export_problems, page_number_problems, page_read

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

__all__ = ["world"]  # the fixture, used by name
SHOTS = Path("/tmp/shots")


def test_it_shows_the_month_by_namespace_with_idle_apart_then_shared(
    page: Any, login: Any, screenshot: Any, finance: Any, world: dict[str, Any]
) -> None:
    login(page, finance)
    page.goto("/costs/?month=2026-11")
    with page.expect_navigation():
        page.click("#by-workload")
    assert urlsplit(page.url).path == "/costs/allocation/"
    with page.expect_navigation():
        page.click('[data-group="namespace"]')
    page.wait_for_selector("#allocation-chart .main-svg")
    assert page.locator('[data-kpi="total"]').inner_text().startswith("1,032.36")
    assert page.locator('[data-kpi="idle"]').inner_text() == "347.63"
    rows = page.locator('table[data-table="allocation"] tbody tr')
    assert [rows.nth(i).get_attribute("data-kind") for i in range(rows.count())] == [
        "workload",
        "workload",
        "unattributed",
        "idle",
    ]
    assert page.locator("#allocation-chart .trace.bars").count() == 3
    read = page_read(page)
    problems = page_number_problems(page, where="allocation", read=read)
    problems += export_problems(page, where="allocation", read=read)
    problems += console_problems(page.console, where="allocation")
    assert problems == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(screenshot(page, "allocation-namespace"), SHOTS / "allocation-namespace.png")

    with page.expect_navigation():
        page.click('[data-idle="share"]')
    page.wait_for_selector("#allocation-chart .main-svg")
    assert page.locator('[data-kpi="total"]').inner_text().startswith("1,032.36")
    assert page.locator('table[data-table="allocation"] tbody tr[data-kind="idle"]').count() == 0
    assert page_number_problems(page, where="allocation shared") == []
    assert page.console == [] and page.js_errors == []
    assert all(
        urlsplit(url).hostname in {"127.0.0.1", None} for url in page.network if url.startswith("http")
    )
