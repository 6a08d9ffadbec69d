"""Alert emails end to end against a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import re
import smtplib
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import Series
from accelboard.core.models import Membership
from accelboard.notifications import services
from accelboard.notifications.choices import DeliveryMode, DeliveryStatus
from accelboard.notifications.models import Delivery, DeliveryItem, Subscription
from accelboard.notifications.tasks import delivery_send as delivery_send_task

from .conftest import SMTPServer, body_of, regression_alert, runs_and_series

pytestmark = pytest.mark.django_db

IMMEDIATE = DeliveryMode.IMMEDIATE
DIGEST = DeliveryMode.DIGEST


def send_all(mode: str = IMMEDIATE) -> list[str]:
    return [services.delivery_send(delivery_id=i) for i in services.deliveries_plan(mode=mode)]


def subscribe(user: Any, team: Any, mode: str = IMMEDIATE, **kwargs: Any) -> Subscription:
    sub = services.subscription_create(user=user, team=team, mode=mode, **kwargs)
    # Backdated: the test's alerts (a minute old) must count as opened after it.
    Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))
    sub.refresh_from_db()
    return sub


def test_it_mails_one_alert_to_its_subscriber_with_subject_text_html_and_links(
    smtp_server: SMTPServer, team: Any, other_team: Any, lead: Any, engineer: Any, other_lead: Any
) -> None:
    subscribe(lead, team)
    subscribe(other_lead, other_team)
    good, bad, series = runs_and_series(team, commit="c0ffee1234567890")
    alert = regression_alert(team=team, series=series, first_run=bad, last_good_run=good, severity="critical")

    assert send_all() == [DeliveryStatus.SENT]

    assert len(smtp_server.messages) == 1
    message = smtp_server.messages[0]
    assert smtp_server.inbox.recipients == [["lead@example.com"]]
    assert message["To"] == "lead@example.com"
    # What moved (the metric's label, not its name), by how much, on what.
    assert message["Subject"] == "[Critical] Output tokens per second -12% on Llama-3.1-8B bf16"
    text = body_of(message, "plain")
    html = body_of(message, "html")
    alert_link = f"https://accelboard.example.com/alerts/{alert.pk}/"
    for body in (text, html):
        assert "5,000 ± 25 tokens/s" in body
        assert "4,400 ± 30 tokens/s" in body
        assert "-12.0% (worse), confidence 97.0%" in body
        assert "900d900d..c0ffee12" in body
        assert alert_link in body
        assert "https://accelboard.example.com/notifications/unsubscribe/" in body
    assert "<a href=" in html and "<a href=" not in text
    unsubscribe = re.search(r"https://\S+/notifications/unsubscribe/[^/\s]+/", text)
    assert unsubscribe is not None
    # A long header is folded onto a continuation line; unfolded it keeps one leading blank.
    assert message["List-Unsubscribe"].strip() == f"<{unsubscribe.group(0)}>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    delivery = Delivery.objects.get()
    assert (delivery.user, delivery.status, delivery.attempts) == (lead, DeliveryStatus.SENT, 1)
    assert delivery.subject == message["Subject"] and delivery.sent_at is not None


def test_it_sends_one_email_when_one_commit_moved_fifty_series(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team, commit="abcdef0123456789")
    alerts = [regression_alert(team=team, series=series, first_run=bad, last_good_run=good)]
    for n in range(49):
        other = Series.objects.create(
            team=team, workload=series.workload, metric=f"metric_{n:02d}", unit="ms", direction="lower"
        )
        alerts.append(
            regression_alert(
                team=team, series=other, first_run=bad, last_good_run=good, pct_change=8.0 + n / 10
            )
        )

    assert send_all() == [DeliveryStatus.SENT]

    assert len(smtp_server.messages) == 1
    message = smtp_server.messages[0]
    # The worst of them (the largest change at equal severity) is named, with the count of the rest.
    assert message["Subject"] == (
        "[Warning] 50 regressions in abcdef01: metric 48 +13% on Llama-3.1-8B bf16, and 49 more"
    )
    text = body_of(message, "plain")
    assert "50 regressions in commit abcdef01 (Inference Platform), the worst first." in text
    assert text.index("metric 48 +13%") < text.index("metric 47 +13%") < text.index("metric 00 +8.0%")
    assert "Output tokens per second -12%" in text
    assert DeliveryItem.objects.filter(user=lead).count() == 50


def test_it_keeps_one_email_per_commit_when_two_commits_moved_series(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team, commit="1111111111aaaa")
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    other_bad = bad.__class__.objects.get(pk=bad.pk)
    other_bad.pk = None
    other_bad.uuid = None
    from uuid import uuid4

    other_bad.uuid = uuid4()
    other_bad.git_commit = "2222222222bbbb"
    other_bad.save()
    regression_alert(team=team, series=series, first_run=other_bad, last_good_run=bad, kind="improvement")

    assert send_all() == [DeliveryStatus.SENT, DeliveryStatus.SENT]
    subjects = sorted(m["Subject"] for m in smtp_server.messages)
    assert len(subjects) == 2
    assert all(s == "[Warning] Output tokens per second -12% on Llama-3.1-8B bf16" for s in subjects)


def test_it_groups_the_days_alerts_per_user_in_one_digest(
    smtp_server: SMTPServer, team: Any, other_team: Any, lead: Any, engineer: Any
) -> None:
    subscribe(lead, team, mode=DIGEST)
    Membership.objects.create(team=other_team, user=lead, role="engineer")
    subscribe(lead, other_team, mode=DIGEST)
    subscribe(engineer, team, mode=IMMEDIATE)
    good, bad, series = runs_and_series(team, commit="aaaa000011112222")
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    good2, bad2, series2 = runs_and_series(other_team, commit="bbbb000011112222")
    regression_alert(team=other_team, series=series2, first_run=bad2, last_good_run=good2, pct_change=-20)

    # Immediate subscribers get theirs at once; digest subscribers wait for the digest.
    assert send_all(IMMEDIATE) == [DeliveryStatus.SENT]
    assert [r for r in smtp_server.inbox.recipients] == [["engineer@example.com"]]

    assert send_all(DIGEST) == [DeliveryStatus.SENT]
    assert send_all(DIGEST) == []  # the same alerts never come twice
    digest = smtp_server.messages[1]
    assert smtp_server.inbox.recipients[1] == ["lead@example.com"]
    # A subject longer than a mail line is folded (Django 6.1 folds before the first word); a
    # mail client shows it unfolded, with the whitespace collapsed.
    subject = " ".join(str(digest["Subject"]).split())
    assert subject.startswith("[accelboard] Daily digest ")
    assert subject.endswith(": 2 alerts (2 warning) in Inference Platform, Research")
    text = body_of(digest, "plain")
    assert ": 2 open alerts (2 warning) in Inference Platform, Research; worst first." in text
    # Grouped by team and commit, the worst (the larger change) first.
    assert text.index("== Research (1 warning)") < text.index("== Inference Platform (1 warning)")
    assert text.index("-- Commit bbbb0000: 1 alert") < text.index("-- Commit aaaa0000: 1 alert")
    assert "-20.0%" in text and "-12.0%" in text
    assert "Unsubscribe from daily digests" in text


def test_it_does_not_mail_an_alert_acknowledged_before_sending(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    acked = regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    Alert.objects.filter(pk=acked.pk).update(state=AlertState.ACKNOWLEDGED)
    assert services.deliveries_plan(mode=IMMEDIATE) == []

    # Planned while open, dismissed before the email went out: skipped, not sent.
    other = Series.objects.create(
        team=team, workload=series.workload, metric="m", unit="ms", direction="lower"
    )
    alert = regression_alert(team=team, series=other, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)
    Alert.objects.filter(pk=alert.pk).update(state=AlertState.DISMISSED)
    assert services.delivery_send(delivery_id=delivery_id) == DeliveryStatus.SKIPPED

    assert smtp_server.messages == []
    delivery = Delivery.objects.get(pk=delivery_id)
    assert delivery.status == DeliveryStatus.SKIPPED
    assert "acknowledged, dismissed or resolved" in delivery.last_error


def test_it_never_mails_an_alert_twice(smtp_server: SMTPServer, team: Any, lead: Any) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)
    assert services.deliveries_plan(mode=IMMEDIATE) == []
    assert services.delivery_send(delivery_id=delivery_id) == DeliveryStatus.SENT
    # A second worker holding the same id finds it sent and sends nothing.
    assert services.delivery_send(delivery_id=delivery_id) == DeliveryStatus.SENT
    assert delivery_send_task.apply(args=[delivery_id]).get() == DeliveryStatus.SENT
    # A new subscription of the same user in digest mode does not bring it back either.
    Subscription.objects.filter(user=lead).update(mode=DIGEST)
    assert services.deliveries_plan(mode=DIGEST) == []
    assert len(smtp_server.messages) == 1
    assert Delivery.objects.get().attempts == 1


def test_it_does_not_mail_someone_who_left_the_team(smtp_server: SMTPServer, team: Any, lead: Any) -> None:
    subscribe(lead, team)
    Membership.objects.filter(user=lead).delete()
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    assert services.deliveries_plan(mode=IMMEDIATE) == []
    assert smtp_server.messages == []


def test_it_matches_series_and_kind_subscriptions_and_prefers_the_narrowest(
    smtp_server: SMTPServer, team: Any, lead: Any, engineer: Any
) -> None:
    good, bad, series = runs_and_series(team)
    other = Series.objects.create(
        team=team, workload=series.workload, metric="m", unit="ms", direction="lower"
    )
    subscribe(lead, team, mode=DIGEST)
    subscribe(lead, team, series=series)  # immediate for this one series only
    subscribe(engineer, team, kind="improvement")
    on_series = regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    regression_alert(team=team, series=other, first_run=bad, last_good_run=good)

    assert send_all(IMMEDIATE) == [DeliveryStatus.SENT]
    assert smtp_server.inbox.recipients == [["lead@example.com"]]
    assert list(DeliveryItem.objects.values_list("alert_id", flat=True)) == [on_series.pk]
    assert send_all(DIGEST) == [DeliveryStatus.SENT]  # the other series, in the digest
    assert len(smtp_server.messages) == 2


def test_it_records_a_refused_send_and_delivers_it_when_the_server_accepts_again(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)

    smtp_server.inbox.fail_with = "451 4.3.0 Mailbox temporarily unavailable"
    with pytest.raises(smtplib.SMTPDataError):
        services.delivery_send(delivery_id=delivery_id)
    delivery = Delivery.objects.get(pk=delivery_id)
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert "451" in delivery.last_error and "temporarily unavailable" in delivery.last_error
    assert delivery.next_attempt_at is not None

    # Down altogether: the connection is refused, recorded as well.
    smtp_server.stop()
    later = delivery.next_attempt_at + timedelta(seconds=1)
    assert services.deliveries_due(now=later) == [delivery_id]
    assert services.deliveries_due(now=delivery.next_attempt_at - timedelta(seconds=1)) == []
    with pytest.raises(OSError):
        services.delivery_send(delivery_id=delivery_id, now=later)
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and delivery.status == DeliveryStatus.FAILED
    assert "Connection refused" in delivery.last_error or "ConnectionRefusedError" in delivery.last_error

    # Back up: the retry pass sends it.
    smtp_server.inbox.fail_with = None
    smtp_server.start()
    later = delivery.next_attempt_at + timedelta(seconds=1)
    assert services.deliveries_due(now=later) == [delivery_id]
    assert services.delivery_send(delivery_id=delivery_id, now=later) == DeliveryStatus.SENT
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == (DeliveryStatus.SENT, 3, "")
    assert len(smtp_server.messages) == 1
    assert services.deliveries_due(now=later + timedelta(days=1)) == []


def test_it_retries_through_the_tasks_declared_backoff(smtp_server: SMTPServer, team: Any, lead: Any) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)
    smtp_server.inbox.fail_times = 2

    # Eager apply runs Celery's own retries at once (the countdown is for a real worker).
    result = delivery_send_task.apply(args=[delivery_id])

    assert result.get() == DeliveryStatus.SENT
    assert smtp_server.inbox.refused == 2 and len(smtp_server.messages) == 1
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 3)
    assert delivery_send_task.autoretry_for == (OSError,)
    assert delivery_send_task.max_retries == services.MAX_ATTEMPTS - 1


def test_it_gives_up_after_the_last_attempt_and_keeps_the_record(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)
    smtp_server.inbox.fail_with = "554 5.7.1 Rejected"
    # Eager apply runs every retry at once; the last one gives up.
    delivery_send_task.apply(args=[delivery_id])
    assert smtp_server.inbox.refused == services.MAX_ATTEMPTS and smtp_server.messages == []
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, services.MAX_ATTEMPTS)
    assert delivery.next_attempt_at is None and "554" in delivery.last_error
    assert services.deliveries_due(now=datetime.now(UTC) + timedelta(days=1)) == []


def test_it_unsubscribes_with_the_emailed_link_without_logging_in(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    sub = subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    send_all()
    text = body_of(smtp_server.messages[0], "plain")
    url = re.search(r"https://accelboard\.example\.com(/notifications/unsubscribe/[^/\s]+/)", text)
    assert url is not None
    anonymous = Client(enforce_csrf_checks=True)

    page = anonymous.get(url.group(1))
    assert page.status_code == 200
    assert "Inference Platform: all alerts" in page.content.decode()
    assert Subscription.objects.filter(pk=sub.pk).exists()  # a GET (a link scanner) changes nothing

    done = anonymous.post(url.group(1))  # what the button and RFC 8058 mail clients do
    assert done.status_code == 200 and "Unsubscribed" in done.content.decode()
    assert not Subscription.objects.filter(pk=sub.pk).exists()
    again = anonymous.post(url.group(1))
    assert again.status_code == 200 and "already unsubscribed" in again.content.decode()

    tampered = url.group(1).replace("/unsubscribe/", "/unsubscribe/x")
    bad_link = anonymous.post(tampered)
    assert bad_link.status_code == 400
    assert "not valid" in bad_link.content.decode()


@pytest.mark.django_db(transaction=True)
def test_it_plans_each_alert_once_when_two_workers_dispatch_at_once(
    smtp_server: SMTPServer, team: Any, lead: Any, engineer: Any
) -> None:
    subscribe(lead, team)
    subscribe(engineer, team)
    good, bad, series = runs_and_series(team)
    for n in range(5):
        other = Series.objects.create(
            team=team, workload=series.workload, metric=f"m{n}", unit="ms", direction="lower"
        )
        regression_alert(team=team, series=other, first_run=bad, last_good_run=good)
    results: list[list[int]] = []
    barrier = threading.Barrier(2)

    def dispatch() -> None:
        try:
            barrier.wait()
            results.append(services.deliveries_plan(mode=IMMEDIATE))
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert sorted(len(r) for r in results) == [0, 2]
    assert DeliveryItem.objects.count() == 10
    assert Delivery.objects.count() == 2


def test_it_holds_a_commits_alerts_until_the_last_one_has_settled(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team, commit="5e771e0000000000")
    now = datetime.now(UTC)
    regression_alert(
        team=team, series=series, first_run=bad, last_good_run=good, opened_at=now - timedelta(minutes=5)
    )
    other = Series.objects.create(
        team=team, workload=series.workload, metric="m", unit="ms", direction="lower"
    )
    # The detector is still opening alerts for this commit: nothing goes out yet.
    regression_alert(team=team, series=other, first_run=bad, last_good_run=good, opened_at=now)
    assert services.deliveries_plan(mode=IMMEDIATE, now=now) == []
    assert services.alerts_settling(now=now)

    later = now + services.SETTLE + timedelta(seconds=1)
    assert not services.alerts_settling(now=later)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE, now=later)
    assert services.delivery_send(delivery_id=delivery_id, now=later) == DeliveryStatus.SENT
    assert smtp_server.messages[0]["Subject"] == (
        "[Warning] 2 regressions in 5e771e00: Output tokens per second -12% on Llama-3.1-8B bf16, and 1 more"
    )


def test_it_resends_deliveries_whose_task_or_worker_was_lost(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    other = Series.objects.create(
        team=team, workload=series.workload, metric="m", unit="ms", direction="lower"
    )
    regression_alert(team=team, series=other, first_run=bad, last_good_run=good)
    [delivery_id] = services.deliveries_plan(mode=IMMEDIATE)
    now = datetime.now(UTC)
    # Planned, but its enqueued send never ran: due once it has waited a while.
    assert services.deliveries_due(now=now) == []
    assert services.deliveries_due(now=now + services.PENDING_STALE + timedelta(seconds=1)) == [delivery_id]
    # Claimed by a worker that then died mid-send: another may claim it once it is stale.
    Delivery.objects.filter(pk=delivery_id).update(status=DeliveryStatus.SENDING, claimed_at=now, attempts=1)
    assert services.delivery_send(delivery_id=delivery_id, now=now) == DeliveryStatus.SENDING
    stale = now + services.SENDING_STALE + timedelta(seconds=1)
    assert services.deliveries_due(now=stale) == [delivery_id]
    assert services.delivery_send(delivery_id=delivery_id, now=stale) == DeliveryStatus.SENT
    assert len(smtp_server.messages) == 1
    assert Delivery.objects.get(pk=delivery_id).attempts == 2
