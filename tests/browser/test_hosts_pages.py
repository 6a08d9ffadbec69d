"""The hosts grid and a host's telemetry page in a real browser: live state, stale agents, charts
with one line per GPU read back from the Plotly divs, and the refresh that redraws without reload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.fleet.models import Accelerator, Host
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = [
    "power",
    "energy",
    "utilisation",
    "memory",
    "clocks",
    "temperature",
    "mem_clocks",
    "throttling",
    "errors",
]


def _seen(host: Host, gpus: list[Accelerator], at: datetime, **state: Any) -> None:
    base = {
        "power_w": 412.0,
        "gpu_util": 77.0,
        "mem_used_bytes": 50 * 2**30,
        "mem_total_bytes": 80 * 2**30,
        "temperature_c": 63.0,
        "throttle_reasons": 0,
    }
    for gpu in gpus:
        Accelerator.objects.filter(pk=gpu.pk).update(
            last_state={**base, **state, "time": at.isoformat()}, last_seen_at=at
        )
    Host.objects.filter(pk=host.pk).update(last_seen_at=at)


@pytest.fixture
def fleet(team: Any, other_team: Any) -> dict[str, Any]:
    factories.accelerator_type_from(factories.H100)
    now = datetime.now(UTC)
    live, live_gpus = factories.host_create(team=team, gpus=4, hostname="gpu-live-01")
    stale, stale_gpus = factories.host_create(team=team, gpus=2, hostname="gpu-stale-02")
    other, other_gpus = factories.host_create(team=other_team, gpus=2, hostname="gpu-other-03")
    factories.telemetry_days_load(gpus=live_gpus, days=1, interval_s=120, now=now + timedelta(hours=1))
    _seen(live, live_gpus[:3], now - timedelta(seconds=20))
    _seen(live, live_gpus[3:], now - timedelta(seconds=20), throttle_reasons=0x40, temperature_c=88.0)
    _seen(stale, stale_gpus, now - timedelta(hours=2))
    _seen(other, other_gpus, now)
    return {"live": live, "stale": stale, "live_gpus": live_gpus}


def test_it_shows_the_lead_their_hosts_live_and_opens_a_hosts_charts(
    page: Any, login: Any, screenshot: Any, lead: Any, fleet: dict[str, Any]
) -> None:
    login(page, lead)
    page.goto("/hosts/")
    cards = page.locator("#host-grid article.host")
    assert cards.count() == 2
    assert "gpu-other-03" not in page.inner_text("main")
    live = page.locator(f"article[data-host='{fleet['live'].pk}']")
    stale = page.locator(f"article[data-host='{fleet['stale'].pk}']")
    assert live.get_attribute("data-stale") == "false"
    assert stale.get_attribute("data-stale") == "true"
    assert stale.locator(".badge.stale").is_visible()
    assert live.locator(".gpu").count() == 4
    assert live.locator(".gpu.throttled").count() == 1
    assert "412 / 700 W" in live.locator(".gpu").first.inner_text()
    assert "50.0 / 80 GiB" in live.locator(".gpu").first.inner_text()
    assert page.js_errors == []
    screenshot(page, "hosts-grid-lead")

    with page.expect_navigation():
        page.click("text=gpu-live-01")
    assert urlsplit(page.url).path == f"/hosts/{fleet['live'].pk}/"
    for key in CHARTS:
        page.wait_for_selector(f"#{key}-chart .main-svg")
    names = page.evaluate("document.getElementById('power-chart').data.map(t => t.name)")
    assert names == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    util_points = page.evaluate("document.getElementById('utilisation-chart')._fullData[0].y.length")
    assert util_points > 100  # six hours of minute buckets, one sample every two minutes
    y_title = page.evaluate("document.getElementById('power-chart').layout.yaxis.title.text")
    assert y_title == "Power (W)"
    assert page.js_errors == []
    screenshot(page, "host-detail-6h")

    # A week reads hour rollups.
    page.click("#range-picker a[data-range='7d']")
    page.wait_for_selector("#power-chart .main-svg")
    assert "1-hour rollups" in page.inner_text("#refresh-status")
    screenshot(page, "host-detail-7d")


def test_it_redraws_a_host_page_from_the_refresh_endpoint_without_reloading(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    host, gpus = factories.host_create(team=team, gpus=2, hostname="gpu-new-04")
    login(page, lead)
    page.goto(f"/hosts/{host.pk}/?range=1h")
    assert page.locator("#telemetry-empty").is_visible()
    assert not page.locator("#host-charts").is_visible()
    screenshot(page, "host-detail-empty")
    page.evaluate("window.__sameDocument = true")

    # The agent starts reporting while the page is open; rollups catch up.
    now = datetime.now(UTC)
    factories.telemetry_load(gpus=gpus, start=now - timedelta(minutes=50), end=now - timedelta(minutes=1))
    from accelboard.fleet.rollup_services import telemetry_rollups_refresh

    telemetry_rollups_refresh(start=now - timedelta(hours=1), end=now)
    with page.expect_request(
        lambda request: f"/hosts/{host.pk}/telemetry.json?range=1h" in request.url, timeout=25_000
    ):
        pass
    page.wait_for_function("() => document.getElementById('refresh-status').dataset.refreshed === '1'")
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("#host-charts").is_visible()
    assert not page.locator("#telemetry-empty").is_visible()
    page.wait_for_selector("#power-chart .main-svg")
    names = page.evaluate("document.getElementById('power-chart').data.map(t => t.name)")
    assert names == ["GPU 0", "GPU 1"]
    assert page.evaluate("document.getElementById('power-chart')._fullData[0].y.length") >= 45
    assert page.js_errors == []
    screenshot(page, "host-detail-after-refresh")
