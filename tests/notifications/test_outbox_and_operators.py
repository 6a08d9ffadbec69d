"""The outbox backend and its staff page; the operator's test email (page button and command);
the deploy checks on SITE_URL and DEFAULT_FROM_EMAIL."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accelboard.notifications import services
from accelboard.notifications.backends import OUTBOX_BACKEND
from accelboard.notifications.choices import DeliveryMode, DeliveryStatus
from accelboard.notifications.models import OutboxMessage, Subscription
from tests.test_deploy_files import ROOT, production_env

from .conftest import SMTPServer, body_of, latency_regression

pytestmark = pytest.mark.django_db


@pytest.fixture
def outbox_backend(settings: Any) -> None:
    settings.SITE_URL = "https://accelboard.example.com"
    if hasattr(settings, "MAILERS"):
        settings.MAILERS = {"default": {"BACKEND": OUTBOX_BACKEND, "OPTIONS": {}}}
    else:
        settings.EMAIL_BACKEND = OUTBOX_BACKEND


def mail_one(team: Any, user: Any) -> Any:
    sub = services.subscription_create(user=user, team=team, mode=DeliveryMode.IMMEDIATE)
    Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))
    alert = latency_regression(team)
    [delivery_id] = services.deliveries_plan(mode=DeliveryMode.IMMEDIATE)
    assert services.delivery_send(delivery_id=delivery_id) == DeliveryStatus.SENT
    return alert


def test_it_keeps_emails_in_the_outbox_as_sent_bytes(outbox_backend: None, team: Any, lead: Any) -> None:
    mail_one(team, lead)
    stored = OutboxMessage.objects.get()
    assert stored.recipients == ["lead@example.com"]
    assert stored.subject == "[Critical] p99 latency +21% on Llama-2-70B fp8 8× H200 SXM 141GB"
    raw = bytes(stored.raw)
    assert b"multipart/related" in raw and b"Content-ID: <chart-" in raw


def test_it_shows_the_outbox_to_staff_only(
    outbox_backend: None, team: Any, lead: Any, staff: Any, login_client: Any
) -> None:
    mail_one(team, lead)
    stored = OutboxMessage.objects.get()
    for path in (
        "/notifications/outbox/",
        f"/notifications/outbox/{stored.pk}/",
        f"/notifications/outbox/{stored.pk}/html/",
    ):
        assert login_client(lead).get(path).status_code == 403, path
    assert login_client(lead).post("/notifications/outbox/clear/").status_code == 403

    admin = login_client(staff)
    listing = admin.get("/notifications/outbox/").content.decode()
    assert "lead@example.com" in listing and "p99 latency +21%" in listing
    assert "Emails are kept here instead of being sent" in listing
    page = admin.get(f"/notifications/outbox/{stored.pk}/").content.decode()
    assert 'sandbox="allow-popups' in page and "allow-scripts" not in page
    assert "Inline images</dt><dd>image/png" in page
    assert "13,075.8 ± 195 ms" in page  # the plain-text version, under the frame (spread to 3 digits)

    frame = admin.get(f"/notifications/outbox/{stored.pk}/html/")
    assert frame.status_code == 200
    assert frame["Content-Security-Policy"].startswith("default-src 'none'; img-src data:;")
    assert frame["X-Frame-Options"] == "SAMEORIGIN"
    html = frame.content.decode()
    assert '<base target="_top">' in html and "cid:" not in html
    image = re.search(r'src="data:image/png;base64,([^"]+)"', html)
    assert image is not None and base64.b64decode(image.group(1))[:4] == b"\x89PNG"
    assert admin.get("/notifications/outbox/999999/").status_code == 404

    assert admin.post("/notifications/outbox/clear/").status_code == 302
    assert not OutboxMessage.objects.exists()


def test_it_sends_a_test_email_from_the_subscriptions_page(
    smtp_server: SMTPServer, lead: Any, login_client: Any
) -> None:
    client = login_client(lead)
    page = client.get("/notifications/subscriptions/").content.decode()
    assert "Send me a test email" in page and "lead@example.com" in page

    response = client.post("/notifications/subscriptions/test-email/")
    assert response.status_code == 302
    [message] = smtp_server.messages
    assert message["To"] == "lead@example.com"
    assert message["Subject"] == "[accelboard] Test email: alert emails can reach you"
    text = body_of(message, "plain")
    assert f"SMTP server: 127.0.0.1:{smtp_server.port}" in text
    assert "Links point to (SITE_URL): https://accelboard.example.com" in text
    assert "sent at the request of lead" in text
    shown = client.get("/notifications/subscriptions/").content.decode()
    assert (
        f"Test email sent to lead@example.com through the SMTP server 127.0.0.1:{smtp_server.port}." in shown
    )

    # The server refuses: its answer is shown, nothing pretends to have been sent.
    smtp_server.inbox.fail_with = "550 5.7.1 Relaying denied"
    client.post("/notifications/subscriptions/test-email/")
    shown = client.get("/notifications/subscriptions/").content.decode()
    assert "The test email was not sent: SMTPDataError" in shown and "Relaying denied" in shown
    assert len(smtp_server.messages) == 1


def test_it_sends_a_test_email_from_the_command(smtp_server: SMTPServer, db: None) -> None:
    out = StringIO()
    call_command("email", "test", "--to", "ops@example.com", stdout=out)
    assert out.getvalue().strip() == (
        f"Test email sent to ops@example.com through the SMTP server 127.0.0.1:{smtp_server.port}."
    )
    assert smtp_server.inbox.recipients == [["ops@example.com"]]

    with pytest.raises(CommandError, match=r"--to: 'not-an-address' is not an email address") as bad:
        call_command("email", "test", "--to", "not-an-address")
    assert bad.value.returncode == 2
    smtp_server.stop()
    with pytest.raises(CommandError, match="the test email was not sent: ConnectionRefusedError") as down:
        call_command("email", "test", "--to", "ops@example.com")
    assert down.value.returncode == 1


def check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"],
        cwd=ROOT,
        env=production_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"SITE_URL": "http://127.0.0.1:8000"}, "accelboard.E005"),
        ({"SITE_URL": "http://localhost:8000"}, "accelboard.E005"),
        ({"SITE_URL": "http://[::1]/"}, "accelboard.E005"),
        ({"SITE_URL": "accelboard.example.com"}, "accelboard.E005"),
        ({"DEFAULT_FROM_EMAIL": "accelboard <alerts@accelboard.localhost>"}, "accelboard.E006"),
        ({"DEFAULT_FROM_EMAIL": "alerts@localhost"}, "accelboard.E006"),
    ],
)
def test_it_fails_the_deploy_check_when_emails_would_carry_local_links_or_sender(
    env: dict[str, str], error: str
) -> None:
    result = check_deploy(**env)
    assert result.returncode != 0
    assert error in result.stderr + result.stdout


def test_it_fails_the_deploy_check_when_site_url_is_left_unset() -> None:
    env = production_env()
    env.pop("SITE_URL")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "accelboard.E005" in result.stderr and "SITE_URL is http://127.0.0.1:8000" in result.stderr
    assert check_deploy().returncode == 0
