"""Alert routes delivered by a REAL Celery worker to loopback servers answering as Slack and
PagerDuty do, a 429 with ``Retry-After`` included."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.alerts.services import alert_raise, alert_resolve
from accelboard.notifications import route_services
from accelboard.notifications.models import AlertRoute, RouteDelivery
from tests.test_celery_worker import WAIT_S, Worker, worker  # noqa: F401 - fixture

from .conftest import runs_and_series
from .route_servers import SLACK_HOOK_PATH, FakeService

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

PD_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"


@pytest.fixture
def route_worker(
    slack: FakeService,
    pagerduty: FakeService,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Worker:
    """The worker, started once the loopback services are named in its environment."""
    for name, value in {
        "ROUTE_SLACK_URL_PREFIXES": f"{slack.base}/services/",
        "ROUTE_PAGERDUTY_URL": f"{pagerduty.base}/v2/enqueue",
        "SITE_URL": "https://accelboard.example.com",
    }.items():
        monkeypatch.setenv(name, value)
    settings.ROUTE_SLACK_URL_PREFIXES = [f"{slack.base}/services/"]
    settings.ROUTE_PAGERDUTY_URL = f"{pagerduty.base}/v2/enqueue"
    return request.getfixturevalue("worker")


def _wait(what: str, check: Any, process: Worker) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    pytest.fail(f"{what} within {WAIT_S}s; worker log:\n{process.output()[-4000:]}")


def test_a_real_worker_delivers_routes_honouring_retry_after(
    route_worker: Worker, slack: FakeService, pagerduty: FakeService, team: Any, lead: Any
) -> None:
    slack_route, _ = route_services.route_create(
        user=lead, team=team, name="#inf", channel="slack", url=slack.base + SLACK_HOOK_PATH
    )
    pd_route, _ = route_services.route_create(
        user=lead, team=team, name="pd", channel="pagerduty", routing_key=PD_KEY
    )
    AlertRoute.objects.update(created_at=datetime.now(UTC) - timedelta(hours=1))
    # Slack is rate limiting: the first post is answered 429 with Retry-After: 1.
    slack.script.append((429, "rate_limited", {"Retry-After": "1"}))
    good, bad, series = runs_and_series(team, commit="feedface00112233")

    # The alerts app's own event: alert_raise publishes alerts_opened on commit, the worker plans
    # (after the commit's alerts have settled) and sends.
    alert, _ = alert_raise(
        team=team,
        kind="regression",
        severity="critical",
        dedupe_key="route-worker:1",
        title="throughput down 30%",
        series=series,
        first_run=bad,
        last_good_run=good,
        before_mean=4400.0,
        after_mean=3080.0,
        pct_change=-30.0,
        confidence=0.99,
    )
    _wait("Slack got its retried message", lambda: len(slack.requests) >= 2, route_worker)
    _wait("PagerDuty got its trigger", lambda: len(pagerduty.requests) >= 1, route_worker)
    _wait(
        "both deliveries sent",
        lambda: RouteDelivery.objects.filter(status="sent").count() == 2,
        route_worker,
    )
    slack_delivery = RouteDelivery.objects.get(route=slack_route)
    assert (slack_delivery.attempts, slack_delivery.response_status, slack_delivery.response_body) == (
        2,
        200,
        "ok",
    )
    assert slack.requests[0].json()["text"] == slack.requests[1].json()["text"]
    assert "-30" in slack.requests[1].json()["text"]
    assert pagerduty.requests[0].json()["event_action"] == "trigger"

    alert_resolve(alert=alert, user=lead)
    _wait("PagerDuty got its resolve", lambda: len(pagerduty.requests) >= 2, route_worker)
    resolve = pagerduty.requests[1].json()
    assert resolve == {
        "routing_key": PD_KEY,
        "event_action": "resolve",
        "dedup_key": f"accelboard-alert-{alert.pk}",
    }
    assert RouteDelivery.objects.filter(route=pd_route).count() == 2
