"""Acknowledge and dismiss from the inbox: the signed links of a message received by a real SMTP
server land on a confirmation page, act once as the recipient, expire, and refuse tampering."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.core import signing
from django.test import Client

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert, AlertEvent
from accelboard.alerts.services import alert_acknowledge
from accelboard.core.models import Membership
from accelboard.notifications import links, services
from accelboard.notifications.choices import DeliveryMode
from accelboard.notifications.models import Delivery, Subscription, TriageLinkUse

from .conftest import SMTPServer, body_of, latency_regression

pytestmark = pytest.mark.django_db
SITE = "https://accelboard.example.com"


def mailed_links(smtp_server: SMTPServer, user: Any, team: Any) -> tuple[Alert, str, str]:
    """Subscribe ``user``, raise an alert, mail it; (alert, acknowledge path, dismiss path)."""
    sub = services.subscription_create(user=user, team=team, mode=DeliveryMode.IMMEDIATE)
    Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))
    alert = latency_regression(team)
    for delivery_id in services.deliveries_plan(mode=DeliveryMode.IMMEDIATE):
        services.delivery_send(delivery_id=delivery_id)
    text = body_of(smtp_server.messages[-1], "plain")
    found = {
        name: re.search(rf"{name}: {re.escape(SITE)}(/notifications/triage/[^/\s]+/)", text)
        for name in ("Acknowledge", "Dismiss")
    }
    assert found["Acknowledge"] and found["Dismiss"], text
    html = body_of(smtp_server.messages[-1], "html")
    assert f'href="{SITE}{found["Acknowledge"].group(1)}" class="acknowledge"' in html
    return alert, found["Acknowledge"].group(1), found["Dismiss"].group(1)


def test_it_acknowledges_once_as_the_recipient_after_a_confirmation_click(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    alert, acknowledge, _ = mailed_links(smtp_server, lead, team)
    reader = Client(enforce_csrf_checks=True)  # the mail client's browser: no session, no CSRF token

    page = reader.get(acknowledge)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Acknowledge this alert?" in html and f"Acknowledge alert #{alert.pk}" in html
    assert "recorded as <strong>lead</strong>" in html
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN  # a link scanner's GET changes nothing
    assert not TriageLinkUse.objects.exists()

    done = reader.post(acknowledge)
    assert done.status_code == 200
    assert "Acknowledged" in done.content.decode()
    alert.refresh_from_db()
    assert (alert.state, alert.acknowledged_by) == (AlertState.ACKNOWLEDGED, lead)
    event = AlertEvent.objects.filter(alert=alert).latest("at")
    assert (event.actor, event.from_state, event.to_state) == (lead, "open", "acknowledged")
    use = TriageLinkUse.objects.get()
    assert (use.user, use.alert, use.action, use.delivery) == (
        lead,
        alert,
        "acknowledge",
        Delivery.objects.get(),
    )

    again = reader.post(acknowledge)
    assert again.status_code == 410
    assert "already used" in again.content.decode()
    assert "already used" in reader.get(acknowledge).content.decode()
    assert AlertEvent.objects.filter(alert=alert, to_state="acknowledged").count() == 1


def test_it_dismisses_with_the_reason_given_on_the_confirmation_page(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    alert, _, dismiss = mailed_links(smtp_server, lead, team)
    reader = Client(enforce_csrf_checks=True)
    assert 'name="reason"' in reader.get(dismiss).content.decode()

    refused = reader.post(dismiss, {"reason": "because"})
    assert refused.status_code == 400
    assert "reason:" in refused.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN and not TriageLinkUse.objects.exists()

    done = reader.post(dismiss, {"reason": "false-alarm", "note": "noisy neighbour on the node"})
    assert done.status_code == 200
    alert.refresh_from_db()
    assert (alert.state, alert.dismissed_reason, alert.dismissed_note) == (
        AlertState.DISMISSED,
        "false-alarm",
        "noisy neighbour on the node",
    )
    assert AlertEvent.objects.filter(alert=alert, to_state="dismissed", actor=lead).exists()


def test_it_refuses_a_tampered_or_foreign_token(smtp_server: SMTPServer, team: Any, lead: Any) -> None:
    alert, acknowledge, _ = mailed_links(smtp_server, lead, team)
    token = acknowledge.split("/")[-2]
    payload, stamp, mac = token.split(":")
    flipped = mac[:-1] + ("A" if mac[-1] != "A" else "B")
    other_alert = links.triage_token(user_id=lead.pk, alert_id=alert.pk + 1, action="acknowledge")
    forged_payload = other_alert.split(":")[0]
    unsubscribe = links.unsubscribe_token(user_id=lead.pk)
    reader = Client(enforce_csrf_checks=True)
    for bad in (
        f"{payload}:{stamp}:{flipped}",  # a changed signature
        f"{forged_payload}:{stamp}:{mac}",  # another alert's payload under this signature
        token[:-6],  # cut by a mail client
        unsubscribe,  # signed by us, but for another purpose
    ):
        for response in (reader.get(links.triage_path(bad)), reader.post(links.triage_path(bad))):
            assert response.status_code == 400, bad
            assert "This link is not valid" in response.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN and not TriageLinkUse.objects.exists()


def test_it_refuses_an_expired_link(
    smtp_server: SMTPServer, team: Any, lead: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    alert, acknowledge, _ = mailed_links(smtp_server, lead, team)
    reader = Client(enforce_csrf_checks=True)
    real = time.time
    # The clock, as Django's signing reads it, a day short of and then past the link's lifetime.
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: real() + 6 * 86400))
    assert reader.get(acknowledge).status_code == 200
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: real() + 7 * 86400 + 60))
    for response in (reader.get(acknowledge), reader.post(acknowledge)):
        assert response.status_code == 410
        assert "This link has expired" in response.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN


def test_it_leaves_the_link_unused_when_the_alert_moved_meanwhile(
    smtp_server: SMTPServer, team: Any, lead: Any, engineer: Any
) -> None:
    alert, acknowledge, dismiss = mailed_links(smtp_server, lead, team)
    alert_acknowledge(alert=alert, user=engineer)  # on the alert's page, before the email was read
    reader = Client(enforce_csrf_checks=True)

    page = reader.get(acknowledge).content.decode()
    assert "Nothing to do: the alert is already acknowledged" in page and "acknowledged by engineer" in page
    refused = reader.post(acknowledge)
    assert refused.status_code == 409
    assert "only open alerts can be acknowledged" in refused.content.decode()
    assert not TriageLinkUse.objects.exists()
    # Dismissing an acknowledged alert is allowed: the other link still works.
    assert reader.post(dismiss, {"reason": "expected"}).status_code == 200
    alert.refresh_from_db()
    assert alert.state == AlertState.DISMISSED


def test_it_refuses_someone_who_may_no_longer_triage(smtp_server: SMTPServer, team: Any, lead: Any) -> None:
    alert, acknowledge, _ = mailed_links(smtp_server, lead, team)
    Membership.objects.filter(user=lead, team=team).update(role="finance")
    reader = Client(enforce_csrf_checks=True)

    assert "can no longer triage" in reader.get(acknowledge).content.decode()
    refused = reader.post(acknowledge)
    assert refused.status_code == 403
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN and not TriageLinkUse.objects.exists()


def _page_without_csrf(response: Any) -> str:
    """The page's HTML, its per-render CSRF tokens blanked (the rest must match byte for byte)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())


def test_it_answers_a_signed_in_user_without_access_as_for_an_alert_that_does_not_exist(
    smtp_server: SMTPServer, team: Any, lead: Any, other_team: Any, other_lead: Any, login_client: Any
) -> None:
    alert, acknowledge, dismiss = mailed_links(smtp_server, lead, team)
    missing = links.triage_path(
        links.triage_token(user_id=lead.pk, alert_id=alert.pk + 1000, action="acknowledge")
    )
    missing_for_other = links.triage_path(
        links.triage_token(user_id=other_lead.pk, alert_id=alert.pk + 1000, action="acknowledge")
    )
    # Another team's lead, signed in, opens a forwarded link: nothing of the alert, nothing done.
    outsider = login_client(other_lead)
    nowhere = outsider.get(missing_for_other)
    assert nowhere.status_code == 404
    for response in (
        outsider.get(acknowledge),
        outsider.post(acknowledge),
        outsider.post(dismiss, {"reason": "expected"}),
    ):
        assert response.status_code == 404
        assert _page_without_csrf(response) == _page_without_csrf(nowhere)
        html = response.content.decode()
        for secret in (alert.title, team.name, f"#{alert.pk}", "recorded as"):
            assert secret not in html, secret

    # The recipient left the team for another one: their own link now tells them as little.
    Membership.objects.filter(user=lead, team=team).delete()
    Membership.objects.create(user=lead, team=other_team, role="engineer")
    for reader in (login_client(lead), Client(enforce_csrf_checks=True)):
        nowhere = reader.get(missing)
        assert nowhere.status_code == 404
        for response in (reader.get(acknowledge), reader.post(acknowledge)):
            assert response.status_code == 404
            assert _page_without_csrf(response) == _page_without_csrf(nowhere)
            assert alert.title not in response.content.decode() and team.name not in response.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN and not TriageLinkUse.objects.exists()


def test_a_signed_in_teammate_still_sees_a_forwarded_link(
    smtp_server: SMTPServer, team: Any, lead: Any, engineer: Any, login_client: Any
) -> None:
    alert, acknowledge, _ = mailed_links(smtp_server, lead, team)
    page = login_client(engineer).get(acknowledge)
    assert page.status_code == 200 and alert.title in page.content.decode()
