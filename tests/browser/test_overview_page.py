"""The overview in a real browser: login form, KPIs, Plotly charts drawn from local plotly.js only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PLOTLY_PATH = "/static/vendor/plotly.min.js"


@pytest.fixture
def fleet(team: Any, other_team: Any) -> dict[str, Any]:
    """The lead's team: two H100 hosts (2 GPUs each) and one L4 host (2 GPUs), three days of
    telemetry with rollups, three runs this week and one older; plus another team's host and run
    that must not show."""
    h100 = factories.accelerator_type_from(factories.H100)
    factories.accelerator_type_from(factories.L4)
    gpus: list[Any] = []
    for _ in range(2):
        gpus += factories.host_create(team=team, gpus=2)[1]
    l4_gpus = factories.host_create(team=team, gpus=2, gpu_name=factories.L4["driver_name"])[1]
    other_gpus = factories.host_create(team=other_team, gpus=8)[1]
    factories.telemetry_days_load(gpus=gpus, days=3, interval_s=300, util_mean=72.0)
    factories.telemetry_days_load(gpus=l4_gpus, days=3, interval_s=300, util_mean=35.0, power_w=60.0, seed=3)
    factories.telemetry_days_load(gpus=other_gpus, days=3, interval_s=900, seed=5)
    now = datetime.now(UTC)
    for days_ago in (1, 2, 5, 12):
        factories.run_create(team=team, accelerator_type=h100, started_at=now - timedelta(days=days_ago))
    factories.run_create(team=other_team, accelerator_type=h100, started_at=now - timedelta(days=1))
    factories.alert_create(team=team, severity="critical")
    factories.alert_create(team=team, severity="warning")
    factories.alert_create(team=team, severity="warning")
    return {"types": ["H100 SXM 80GB", "L4"]}


def _left_loopback(urls: list[str]) -> list[str]:
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in {"data", "blob", "about"} and urlsplit(url).hostname != "127.0.0.1"
    ]


def test_it_redirects_an_anonymous_visitor_to_the_login_form(page: Any) -> None:
    page.goto("/")
    assert urlsplit(page.url).path == "/accounts/login/"
    assert urlsplit(page.url).query == "next=/"
    assert page.locator("#id_username").is_visible()
    assert page.locator("#utilisation-chart").count() == 0


def test_it_rejects_a_wrong_password(page: Any, lead: Any) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", "lead")
    page.fill("#id_password", "not-the-password")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert urlsplit(page.url).path == "/accounts/login/"
    assert "didn't match" in page.locator(".error").inner_text()


def test_it_draws_the_overview_for_the_team_lead(
    page: Any, login: Any, screenshot: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    responses: dict[str, int] = {}
    page.on("response", lambda response: responses.__setitem__(urlsplit(response.url).path, response.status))

    login(page, lead)
    assert urlsplit(page.url).path == "/"
    page.wait_for_selector("#utilisation-chart .main-svg")
    page.wait_for_selector("#energy-chart .main-svg")

    # KPIs: the lead's team only (3 hosts, 6 GPUs, 3 runs in the last 7 days, open alerts by severity).
    assert page.inner_text("[data-kpi=hosts]") == "3"
    assert page.inner_text("[data-kpi=gpus]") == "6"
    assert page.inner_text("[data-kpi=runs]") == "3"
    assert page.inner_text("[data-kpi=alerts] .sev.critical .count") == "1"
    assert page.inner_text("[data-kpi=alerts] .sev.warning .count") == "2"
    assert page.inner_text("[data-kpi=alerts] .sev.info .count") == "0"

    # One line and one bar series per accelerator type, named after it in the legend.
    assert page.locator("#utilisation-chart .scatterlayer .trace").count() == 2
    assert page.locator("#energy-chart .barlayer .trace").count() == 2
    assert page.locator("#utilisation-chart .legendtext").all_text_contents() == fleet["types"]
    assert page.locator("#energy-chart .legendtext").all_text_contents() == fleet["types"]
    # Three days of hourly points really were drawn (a line path, not an empty trace).
    path = page.locator("#utilisation-chart .scatterlayer .trace").first.locator("path.js-line")
    assert path.get_attribute("d").count("L") >= 3 * 24 - 2
    assert page.locator("#energy-chart .barlayer .point").count() >= 2 * 3

    # plotly.js came from our own static files; nothing left the loopback interface.
    assert responses.get(PLOTLY_PATH) == 200
    assert _left_loopback(page.network) == []
    assert page.js_errors == []

    shot = screenshot(page, "overview-lead")
    assert shot.stat().st_size > 10_000


def test_it_tells_a_user_without_a_team_what_to_do(
    page: Any, login: Any, screenshot: Any, outsider: Any, fleet: dict[str, Any]
) -> None:
    login(page, outsider)
    # Zeros for someone in no team would be noise: the page says what to do instead.
    assert page.locator("[data-kpi=hosts]").count() == 0
    assert page.locator("#utilisation-chart").count() == 0
    assert "You are not in a team yet" in page.inner_text("main")
    assert _left_loopback(page.network) == []
    assert page.js_errors == []
    screenshot(page, "overview-empty")
