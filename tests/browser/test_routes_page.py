"""The alert routes page in Chromium: add a Slack route, send a test to a loopback server that
answers as Slack does, see the answer in the delivery log, refuse a bad PagerDuty key."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from accelboard.notifications.models import AlertRoute, RouteDelivery
from tests.notifications.route_servers import SLACK_HOOK_PATH, FakeService, serve

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_slack(settings: Any) -> Iterator[FakeService]:
    for service in serve(FakeService("slack")):
        settings.ROUTE_SLACK_URL_PREFIXES = [f"{service.base}/services/"]
        settings.ROUTE_PUBLIC_ONLY = False
        yield service


def test_a_lead_adds_a_slack_route_and_sends_a_test(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any, fake_slack: FakeService
) -> None:
    login(page, lead)
    page.goto("/notifications/routes/")
    assert page.locator("#no-routes").is_visible()

    # A PagerDuty key of the wrong shape: the field says why, nothing is stored.
    page.fill("#id_name", "on-call")
    page.select_option("#id_channel", value="pagerduty")
    page.fill("#id_routing_key", "abc123")
    with page.expect_navigation():
        page.click("#add-route button[type=submit]")
    assert "32 letters and digits (this one has 6 characters)" in page.locator("#add-route").inner_text()
    assert AlertRoute.objects.count() == 0

    page.fill("#id_name", "#inference-alerts")
    page.select_option("#id_channel", value="slack")
    page.select_option("#id_min_severity", value="critical")
    page.fill("#id_url", fake_slack.base + SLACK_HOOK_PATH)
    page.fill("#id_routing_key", "")
    with page.expect_navigation():
        page.click("#add-route button[type=submit]")
    assert "Route “#inference-alerts” added: Slack." in page.locator(".messages").inner_text()
    route = AlertRoute.objects.get()
    assert SLACK_HOOK_PATH not in route.secret

    with page.expect_navigation():
        page.click(f'[data-test-route="{route.pk}"]')
    assert "Test sent to “#inference-alerts”: HTTP 200." in page.locator(".messages").inner_text()
    log = page.locator("#route-deliveries").inner_text()
    assert "accelboard test: route “#inference-alerts” works" in log and "HTTP 200" in log
    assert fake_slack.requests[0].json()["blocks"][0]["type"] == "header"
    assert RouteDelivery.objects.get().response_body == "ok"
    path = screenshot(page, "alert-routes")
    shutil.copy(path, "/tmp/h35routes_routes.png")
