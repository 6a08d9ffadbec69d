"""Dispatch through a REAL Celery worker to a REAL SMTP server (aiosmtpd on loopback).

The worker (see ``tests/test_celery_worker.py``) is a separate process on the test database; its
Django settings come from the environment, so the SMTP variables are set before it starts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.core.choices import JobStatus
from accelboard.notifications import services
from accelboard.notifications.choices import DeliveryMode, DeliveryStatus
from accelboard.notifications.models import Delivery, Subscription
from accelboard.notifications.tasks import alerts_dispatch
from tests.test_celery_worker import WAIT_S, Worker, wait_for_job, worker  # noqa: F401 - fixture

from .conftest import SMTPServer, body_of, regression_alert, runs_and_series

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def smtp_env(smtp_server: SMTPServer, monkeypatch: pytest.MonkeyPatch) -> SMTPServer:
    """Point the worker's settings at the loopback SMTP server (requested before ``worker``)."""
    monkeypatch.setenv("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
    monkeypatch.setenv("EMAIL_HOST", "127.0.0.1")
    monkeypatch.setenv("EMAIL_PORT", str(smtp_server.port))
    monkeypatch.setenv("SITE_URL", "https://accelboard.example.com")
    return smtp_server


@pytest.fixture
def mail_worker(smtp_env: SMTPServer, request: pytest.FixtureRequest) -> Worker:
    """The shared real-worker fixture, started only once the SMTP variables are in place."""
    return request.getfixturevalue("worker")


def wait_for_messages(server: SMTPServer, count: int, process: Worker) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if len(server.messages) >= count:
            return
        time.sleep(0.25)
    pytest.fail(
        f"{len(server.messages)} of {count} emails within {WAIT_S}s; worker log:\n{process.output()[-4000:]}"
    )


def test_it_mails_new_alerts_from_a_real_worker(
    smtp_env: SMTPServer, mail_worker: Worker, team: Any, lead: Any, engineer: Any
) -> None:
    for user in (lead, engineer):
        sub = services.subscription_create(user=user, team=team, mode=DeliveryMode.IMMEDIATE)
        Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))
    good, bad, series = runs_and_series(team, commit="feedface00112233")
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)

    result = alerts_dispatch.delay()

    job = wait_for_job(result.id, mail_worker)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.rows == 2
    wait_for_messages(smtp_env, 2, mail_worker)
    assert sorted(r[0] for r in smtp_env.inbox.recipients) == ["engineer@example.com", "lead@example.com"]
    assert "https://accelboard.example.com/notifications/unsubscribe/" in body_of(
        smtp_env.messages[0], "plain"
    )
    # Drawn and signed in the worker: the inline chart and each recipient's own triage links.
    for message in smtp_env.messages:
        assert [p.get_content_type() for p in message.walk()].count("image/png") == 1
        assert "Acknowledge: https://accelboard.example.com/notifications/triage/" in body_of(
            message, "plain"
        )
    assert body_of(smtp_env.messages[0], "plain") != body_of(smtp_env.messages[1], "plain")
    deadline = time.monotonic() + WAIT_S
    while Delivery.objects.exclude(status=DeliveryStatus.SENT).exists() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert list(Delivery.objects.values_list("status", "attempts")) == [(DeliveryStatus.SENT, 1)] * 2

    # Dispatching again (a second enqueue, a beat pass) mails nothing new.
    again = alerts_dispatch.delay()
    assert wait_for_job(again.id, mail_worker).rows == 0
    time.sleep(1)
    assert len(smtp_env.messages) == 2

    # The alerts app's own hook: alert_raise enqueues alerts_dispatch on commit; the fresh alert
    # is held until it has settled, then the rescheduled dispatch mails it.
    from accelboard.alerts.services import alert_raise

    _, later_run, _ = runs_and_series(team, commit="0123abcd99999999")
    alert_raise(
        team=team,
        kind="regression",
        severity="critical",
        dedupe_key="worker-test:hook",
        title="throughput down 30%",
        series=series,
        first_run=later_run,
        last_good_run=bad,
        before_mean=4400.0,
        after_mean=3080.0,
        pct_change=-30.0,
        confidence=0.99,
    )
    wait_for_messages(smtp_env, 4, mail_worker)
    subjects = {m["Subject"] for m in smtp_env.messages[2:]}
    assert subjects == {"[Critical] Output tokens per second -30% on Llama-3.1-8B bf16"}
