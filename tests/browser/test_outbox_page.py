"""The demo's outbox in Chromium: a regression posted by the simulated CI through the API is
detected and mailed by a real Celery worker into the outbox; staff open it and follow its
acknowledge link. Also the three kinds of alert email at desktop and phone widths."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert
from accelboard.api.services import token_create
from accelboard.notifications import selectors, services
from accelboard.notifications.backends import OUTBOX_BACKEND
from accelboard.notifications.choices import DeliveryMode
from accelboard.notifications.models import OutboxMessage, Subscription
from accelboard.notifications.simulated_ci import regression_post
from tests.factories import run_create
from tests.notifications.conftest import agreement_alert, drift_alert, h200_type, latency_regression
from tests.test_celery_worker import Worker, worker  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# Detection, the settling pause of a commit's alerts (20 s) and the send, on a busy machine.
MAIL_WAIT_S = 180


@pytest.fixture
def demo_worker(live_server: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Worker:
    """A real worker configured as the demo's: emails to the outbox, links to this server."""
    monkeypatch.setenv("EMAIL_BACKEND", OUTBOX_BACKEND)
    monkeypatch.setenv("SITE_URL", live_server.url)
    return request.getfixturevalue("worker")


def latency_history(team: Any) -> None:
    """What the demo's CI has benchmarked so far: p99 latency of one configuration, steady."""
    h200 = h200_type()
    start = datetime.now(UTC) - timedelta(days=14)
    for n in range(14):
        run_create(
            team=team,
            accelerator_type=h200,
            accelerator_count=8,
            model="Llama-2-70B",
            variant="fp8",
            precision="fp8",
            metrics={
                "latency_p99_ms": 13075.8 + ((n * 37) % 11 - 5) * 30.0,
                "throughput_tokens_per_s": 22010.0,
            },
            started_at=start + timedelta(days=n),
        )


def wait_until(condition: Any, what: str, process: Worker, timeout: float = MAIL_WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout:.0f}s; worker log:\n{process.output()[-4000:]}")


@pytest.mark.celery_worker
def test_it_delivers_the_simulated_ci_regression_to_the_outbox_and_acknowledges_from_it(
    live_server: Any, page: Any, login: Any, screenshot: Any, team: Any, lead: Any, staff: Any, request: Any
) -> None:
    latency_history(team)
    process = request.getfixturevalue("demo_worker")
    # The demo's calls: its leads subscribed, then its simulated CI posting through the API.
    assert services.subscriptions_for_team_leads() == 1
    template = selectors.simulated_ci_template(team_slug=team.slug)
    assert template is not None
    _, token = token_create(team=team, kind="ingest", name="demo simulated CI")
    posted, _ = regression_post(
        server=live_server.url,
        token=token,
        template=template,
        alerted=lambda run_ids: selectors.alerts_opened_on_runs(run_ids=run_ids),
        interval_s=4,
        max_runs=3,
        say=lambda line: None,
    )
    alert = wait_until(
        lambda: Alert.objects.filter(first_run_id__in=posted, series__metric="latency_p99_ms").first(),
        "no p99 latency alert on the posted runs",
        process,
    )
    stored = wait_until(lambda: OutboxMessage.objects.first(), "no email in the outbox", process)
    assert stored.recipients == ["lead@example.com"]
    assert "p99 latency +2" in stored.subject and "on Llama-2-70B fp8 8× H200 SXM 141GB" in stored.subject

    login(page, staff)
    page.goto("/notifications/outbox/")
    row = page.locator(f'tr[data-message="{stored.pk}"]')
    assert "lead@example.com" in row.inner_text()
    screenshot(page, "outbox-list")
    with page.expect_navigation():
        row.locator("a").click()
    frame = page.frame_locator("#mail-html")
    card = frame.locator(f'table.alert[data-alert="{alert.pk}"]')
    assert "13,0" in card.inner_text() and "ms" in card.inner_text()
    chart = card.locator("img")
    assert chart.evaluate("img => img.complete && img.naturalWidth") == 1200
    screenshot(page, "outbox-message")

    # The email's acknowledge link: a confirmation page (no login needed), then one click.
    with page.expect_navigation():
        card.locator("a.acknowledge").click()
    assert "/notifications/triage/" in page.url
    assert "Acknowledge this alert?" in page.locator("#triage").inner_text()
    screenshot(page, "triage-confirm")
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN
    with page.expect_navigation():
        page.click("#confirm")
    assert "Acknowledged" in page.locator("#triage").inner_text()
    screenshot(page, "triage-done")
    alert.refresh_from_db()
    assert (alert.state, alert.acknowledged_by) == (AlertState.ACKNOWLEDGED, lead)
    assert page.js_errors == []


def test_it_shows_alert_emails_without_sideways_scrolling_at_desktop_and_phone_widths(
    page: Any, login: Any, screenshot: Any, settings: Any, live_server: Any, team: Any, lead: Any, staff: Any
) -> None:
    settings.SITE_URL = live_server.url
    if hasattr(settings, "MAILERS"):
        settings.MAILERS = {"default": {"BACKEND": OUTBOX_BACKEND, "OPTIONS": {}}}
    else:
        settings.EMAIL_BACKEND = OUTBOX_BACKEND
    sub = services.subscription_create(user=lead, team=team, mode=DeliveryMode.IMMEDIATE)
    Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))
    latency_regression(team)
    drift_alert(team)
    for delivery_id in services.deliveries_plan(mode=DeliveryMode.IMMEDIATE):
        services.delivery_send(delivery_id=delivery_id)
    # Then the same reader on a daily digest, with the next day's alerts.
    Subscription.objects.filter(pk=sub.pk).update(mode=DeliveryMode.DIGEST)
    latency_regression(
        team, commit="7bc1e0a9d2f4", before=2310.0, after=2630.0, severity="warning", model="Mixtral-8x7B"
    )
    drift_alert(team, verdict="trending", loss=0.021, days_to_budget=12.4, slope_per_day=0.0007)
    agreement_alert(team)
    for delivery_id in services.deliveries_plan(mode=DeliveryMode.DIGEST):
        services.delivery_send(delivery_id=delivery_id)
    emails = {
        "regression": OutboxMessage.objects.get(subject__startswith="[Critical] p99 latency"),
        "drift": OutboxMessage.objects.get(subject__contains="mmlu accuracy -3.1%, over its 3% budget"),
        "digest": OutboxMessage.objects.get(subject__startswith="[accelboard] Daily digest"),
    }
    login(page, staff)
    for width in (800, 375):
        page.set_viewport_size({"width": width, "height": 900})
        for name, message in emails.items():
            page.goto(f"/notifications/outbox/{message.pk}/html/")
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"the {name} email scrolls sideways by {overflow}px at {width}px"
            if name != "drift":
                image = page.locator("img").first
                assert image.evaluate("img => img.complete && img.naturalWidth") == 1200
                assert image.bounding_box()["width"] <= width
            screenshot(page, f"email-{name}-{width}")
    assert page.js_errors == []
