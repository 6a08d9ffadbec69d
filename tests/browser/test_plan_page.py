"""The capacity plan in a real browser, as a team lead and as finance, on the hand-worked world of
``tests/planning/world.py``: the answer and its charts, the assumptions form (a new answer and a
shareable URL), exports, saving a plan and reading it back against the months since."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from openpyxl import load_workbook

from tests.planning import world as w

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(team: Any, other_team: Any) -> w.World:
    return w.world_build(team=team)


def _left_loopback(urls: list[str]) -> list[str]:
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in {"data", "blob", "about"} and urlsplit(url).hostname != "127.0.0.1"
    ]


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#sensitivity-chart .main-svg")
    page.wait_for_selector("#traffic-chart .main-svg")


def test_a_lead_reads_the_answer_changes_the_assumptions_and_saves_the_plan(
    page: Any, login: Any, screenshot: Any, lead: Any, world: w.World
) -> None:
    login(page, lead)
    _open(page, "/plan/?weeks=2")
    headline = page.inner_text("[data-headline]")
    assert headline.startswith("fp8 on 8× H200 SXM 141GB serves the planned peak of 10,000 output tokens/s")
    assert "fp16 on 8× H100 SXM 80GB is cheaper per token on its benchmark" in headline
    assert page.inner_text("[data-kpi=gpus]") == "16"
    assert page.locator("[data-table=options] tbody tr").count() == 2
    assert (
        page.get_attribute("[data-table=options] tbody tr >> nth=0", "data-option")
        == "fp8 on 8× H200 SXM 141GB"
    )
    assert page.locator("[data-table=options] tbody tr >> nth=0").locator("[data-current]").count() == 1
    assert page.locator("[data-table=options] tbody tr >> nth=1").locator(".badge.cheap").count() == 1
    # The sensitivity chart: the two ranked options and today's cost, one point per growth step.
    assert page.locator("#sensitivity-chart .legendtext").all_text_contents() == [
        "fp8 on 8× H200 SXM 141GB",
        "fp16 on 8× H100 SXM 80GB",
        "today (8× H200 SXM 141GB)",
    ]
    assert page.locator("#traffic-chart .legendtext").all_text_contents() == [
        "daily mean",
        "daily peak",
        "sized for (peak × growth × headroom)",
    ]
    assert page.locator("[data-table=headroom] tbody tr").count() == 6
    screenshot(page, "plan-lead")

    # A looser objective lets the H100s run batch 128: the answer changes, the URL carries it all.
    page.fill("input[name=e2e_ms]", "40000")
    page.fill("input[name=headroom]", "50")
    with page.expect_navigation():
        page.click("[data-assumptions] button[type=submit]")
    query = parse_qs(urlsplit(page.url).query)
    assert query["e2e_ms"] == ["40000"] and query["headroom"] == ["50"] and query["weeks"] == ["2"]
    page.wait_for_selector("#sensitivity-chart .main-svg")
    assert page.inner_text("[data-headline]").startswith("fp16 on 8× H100 SXM 80GB serves")
    share = page.get_attribute("[data-share]", "href")
    assert share is not None and "e2e_ms=40000" in share and "headroom=50" in share

    # Save it: the scenario page shows the answer and the months since.
    page.fill("[data-save] input[name=name]", "Looser SLO")
    with page.expect_navigation():
        page.click("[data-save] button[type=submit]")
    assert "/plan/scenarios/" in page.url
    assert page.inner_text("h1") == "Saved plan: Looser SLO"
    assert page.inner_text("[data-headline]").startswith("fp16 on 8× H100 SXM 80GB serves")
    assert page.locator("[data-table=actuals] tbody tr").count() >= 1
    screenshot(page, "plan-scenario")
    with page.expect_navigation():
        page.click("[data-reopen]")
    assert parse_qs(urlsplit(page.url).query)["e2e_ms"] == ["40000.0"]
    page.wait_for_selector("#sensitivity-chart .main-svg")
    assert page.locator("[data-table=scenarios] [data-scenario='Looser SLO']").count() == 1
    assert page.js_errors == [] and _left_loopback(page.network) == []


def test_finance_compares_price_bases_exports_and_saves(
    page: Any, login: Any, screenshot: Any, finance: Any, world: w.World, tmp_path: Any
) -> None:
    login(page, finance)
    _open(page, "/plan/?weeks=2")
    assert page.inner_text("[data-kpi=gpus]") == "16"
    # Cloud on-demand instead of the on-prem servers: the H200 has no such price and is set aside.
    page.select_option("select[name=where]", "aws")
    with page.expect_navigation():
        page.click("[data-assumptions] button[type=submit]")
    page.wait_for_selector("[data-table=unranked]")
    row = page.locator("[data-table=unranked] tr[data-option='fp8 on 8× H200 SXM 141GB']")
    assert row.get_attribute("data-status") == "no-price"
    assert "Would need 16 GPUs." in row.inner_text()
    assert page.inner_text("[data-headline]").startswith("fp16 on 8× H100 SXM 80GB serves")
    screenshot(page, "plan-finance-aws")

    # The XLSX holds the same options the page ranks.
    with page.expect_download() as download:
        page.click("[data-export=xlsx]")
    path = tmp_path / "plan.xlsx"
    download.value.save_as(path)
    sheet = load_workbook(path)["options"]
    header = [cell.value for cell in sheet[1]]
    first = dict(zip(header, [cell.value for cell in sheet[2]], strict=True))
    assert first["Option"] == "fp16 on 8× H100 SXM 80GB" and first["Rank"] == 1
    shown = page.inner_text("[data-table=options] tbody tr >> nth=0 >> [data-col=total]")
    assert f"{first['Total per month (USD)']:,.0f}" == shown.split()[0]

    page.fill("[data-save] input[name=name]", "AWS on-demand")
    with page.expect_navigation():
        page.click("[data-save] button[type=submit]")
    assert page.inner_text("h1") == "Saved plan: AWS on-demand"
    assert page.js_errors == [] and _left_loopback(page.network) == []


def test_an_engineer_reads_the_plan_but_has_no_save_form(
    page: Any, login: Any, engineer: Any, world: w.World
) -> None:
    login(page, engineer)
    _open(page, "/plan/?weeks=2")
    assert page.locator("[data-save]").count() == 0
    assert "Team leads and finance save plans" in page.inner_text("#scenarios")
