"""What a reader gets, checked on messages received by a real SMTP server (aiosmtpd on loopback):
subjects, numbers as the pages write them, labelled drift values, links, the inline chart."""

from __future__ import annotations

import re
import struct
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from accelboard.notifications import services
from accelboard.notifications.choices import DeliveryMode, DeliveryStatus
from accelboard.notifications.models import Subscription

from .conftest import SMTPServer, agreement_alert, body_of, drift_alert, latency_regression

pytestmark = pytest.mark.django_db
E_NOTATION = re.compile(r"\d[eE][+-]\d")


def subscribe(user: Any, team: Any, mode: str = DeliveryMode.IMMEDIATE) -> None:
    sub = services.subscription_create(user=user, team=team, mode=mode)
    Subscription.objects.filter(pk=sub.pk).update(created_at=datetime.now(UTC) - timedelta(minutes=10))


def send_all(mode: str = DeliveryMode.IMMEDIATE) -> list[str]:
    return [services.delivery_send(delivery_id=i) for i in services.deliveries_plan(mode=mode)]


def subject(message: EmailMessage) -> str:
    # A long subject is folded; a mail client shows it unfolded.
    return " ".join(str(message["Subject"]).split())


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_it_mails_a_regression_that_answers_what_when_and_where_without_a_click(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    alert = latency_regression(team)

    assert send_all() == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    assert subject(message) == "[Critical] p99 latency +21% on Llama-2-70B fp8 8× H200 SXM 141GB"
    text, html = body_of(message, "plain"), body_of(message, "html")
    first, good = alert.first_run, alert.last_good_run
    for body in (text, html):
        assert not E_NOTATION.search(body)
        # Each level's own spread, to three significant digits as the alert chart's legend writes it.
        assert "13,075.8 ± 195 ms" in body and "15,826.4 ± 210 ms" in body
        assert "+21.0% (worse), confidence &gt; 99.9%" in body or "+21.0% (worse), confidence > 99.9%" in body
        assert (
            f"between {good.started_at:%Y-%m-%d %H:%M} UTC and {first.started_at:%Y-%m-%d %H:%M} UTC" in body
        )
        assert f"https://accelboard.example.com/runs/{first.pk}/" in body
        assert f"https://accelboard.example.com/runs/{good.pk}/" in body
        assert f"run #{first.pk} · 020959f1 on main" in body
        assert f"{good.git_commit[:8]}..020959f1" in body
        assert "https://ci.example.com/jobs/4711" in body
        assert f"https://accelboard.example.com/runs/compare/?a={good.pk}&amp;b={first.pk}" in body or (
            f"https://accelboard.example.com/runs/compare/?a={good.pk}&b={first.pk}" in body
        )
        assert "Offline, bs64" in body and "bs64, 8×" not in body
        assert "/notifications/triage/" in body
    assert "–" not in text and "confidence –" not in text

    # The chart: an inline PNG beside the HTML (multipart/related), referenced by its Content-ID,
    # sized for email, with a text alternative in both versions.
    related = [p for p in message.walk() if p.get_content_type() == "multipart/related"]
    assert len(related) == 1
    images = [p for p in message.walk() if p.get_content_type() == "image/png"]
    assert len(images) == 1
    content_id = str(images[0]["Content-ID"]).strip("<>")
    assert images[0].get_content_disposition() == "inline"
    assert f'src="cid:{content_id}"' in html
    png = images[0].get_content()
    assert png_size(png) == (1200, 440)
    assert 5_000 < len(png) < 120_000
    alt = re.search(r'<img src="cid:[^"]+" alt="([^"]+)"', html)
    assert alt is not None
    assert alt.group(1) == (
        f"Chart of p99 latency, 15 results: about 13,075.8 ms before the change and 15,826.4 ms after it "
        f"(first run after it {first.started_at:%Y-%m-%d})."
    )
    assert f"Chart (in the HTML version): {alt.group(1)}" in text


def test_it_mails_drift_with_labelled_values_and_its_budget(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    drift_alert(team)

    assert send_all() == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    assert subject(message) == "[Critical] Llama-3.1-8B int4-awq: mmlu accuracy -3.1%, over its 3% budget"
    text = body_of(message, "plain")
    assert "Measured accuracy: 0.6626 (mmlu, 2026-11-30)" in text
    assert "Reference accuracy: 0.6835" in text
    assert "Accuracy loss: 3.06% of the reference accuracy (budget 3%, over it)" in text
    assert "Evaluations: 42 compared with the reference" in text
    # Nothing the alert does not carry: no empty before/after, commits or confidence rows.
    for absent in ("Before:", "After:", "Commits:", "confidence", "–", "0.03064"):
        assert absent not in text, absent
    assert not E_NOTATION.search(text + body_of(message, "html"))
    assert not [p for p in message.walk() if p.get_content_type() == "image/png"]


def test_it_mails_production_agreement_with_its_budget_and_samples(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team)
    agreement_alert(team)

    assert send_all() == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    assert (
        subject(message)
        == "[Critical] Llama-3.1-8B fp8: production agreement (chat) -2.4%, over its 1% budget"
    )
    text = body_of(message, "plain")
    assert "Agreement now: 90.39% (latest window, 8,598 samples)" in text
    assert "Agreement, first week: 92.62%" in text
    assert "Drop: 2.41% relative to the first week (budget 1%, over it)" in text
    assert "0.9262" not in text and "0.9039" not in text


def test_it_puts_severity_counts_on_top_of_a_digest_and_the_worst_first(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    subscribe(lead, team, mode=DeliveryMode.DIGEST)
    drift_alert(team, verdict="trending", loss=0.021, days_to_budget=12.4)
    latency_regression(team)
    agreement_alert(team)

    assert send_all(DeliveryMode.DIGEST) == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    day = datetime.now(UTC).date().isoformat()
    assert subject(message) == (
        f"[accelboard] Daily digest {day}: 3 alerts (2 critical, 1 warning) in Inference Platform"
    )
    html, text = body_of(message, "html"), body_of(message, "plain")
    counts = html.index('id="severity-counts"')
    assert counts < html.index('class="alert"')
    assert re.search(
        r"<strong>2</strong> critical</span>.*<strong>1</strong> warning</span>", html[counts:], re.S
    )
    # Critical first (the larger change first), then the warning; the commit's group has its own line.
    order = [
        text.index(s) for s in ("p99 latency +21%", "production agreement (chat)", "mmlu accuracy -2.1%")
    ]
    assert order == sorted(order)
    assert "-- Commit 020959f1: 1 alert" in text
    assert "reaches its 3% budget in ~12 days" in text
    # The alerts without a commit have their own line, never under the commit's above them.
    assert text.index("-- Without a commit · Production agreement") < text.index(
        "production agreement (chat)"
    )
    assert text.index("-- Without a commit · Quantization drift") < text.index("mmlu accuracy -2.1%")
    assert text.count("-- ") == 3


def test_it_says_a_drift_alert_over_its_budget_crossed_it_with_the_trend_signed_like_the_change(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    # The demo's drift emails read "Trend +0.048% per day, reaches the budget in ~0 days" on an
    # alert 5.19% over a 3% budget: a projection of what has happened, signed against the change.
    subscribe(lead, team)
    drift_alert(team, loss=0.0519, slope_per_day=0.00048, days_to_budget=0.0)

    assert send_all() == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    for body in (body_of(message, "plain"), body_of(message, "html")):
        assert "~0 days" not in body and "reaches the budget" not in body
        assert "-0.048% per day (accuracy falling), over the budget already" in body
        assert "+0.048%" not in body
    assert subject(message) == "[Critical] Llama-3.1-8B int4-awq: mmlu accuracy -5.2%, over its 3% budget"


def test_it_heads_an_alert_without_a_commit_in_a_digest_with_what_it_is(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    # The production-agreement alert had no header line and read as a second alert of the commit
    # above it ("Commit 38adef8f · 1 alert" over two cards).
    subscribe(lead, team, mode=DeliveryMode.DIGEST)
    latency_regression(team)
    agreement_alert(team)

    assert send_all(DeliveryMode.DIGEST) == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    html = body_of(message, "html")
    headers = re.findall(r'<p style="margin:10px 0 6px;color:#6b7280;font-size:13px;">(.*?)</p>', html, re.S)
    assert [re.sub(r"<[^>]+>", "", h) for h in headers] == [
        "Commit 020959f1 · 1 alert",
        "Without a commit · Production agreement",
    ]
    # Each header sits right over its own card.
    agreement_header = html.index("Without a commit · Production agreement")
    assert html.index("production agreement (chat)") > agreement_header > html.index("p99 latency +21%")


def test_it_writes_each_levels_own_spread_and_no_borrowed_one(
    smtp_server: SMTPServer, team: Any, lead: Any
) -> None:
    # Two results after the change: the detector stored the baseline's spread as the after level's
    # too, and the email read "4,655.19 ± 62.4314 ms" before and "5,636.66 ± 62.4314 ms" after.
    subscribe(lead, team)
    alert = latency_regression(team, runs_after=2)
    alert.before_spread = alert.after_spread = 62.4314
    alert.detail = {"results_after": 2}
    alert.save()

    assert send_all() == [DeliveryStatus.SENT]

    [message] = smtp_server.messages
    for body in (body_of(message, "plain"), body_of(message, "html")):
        assert "13,075.8 ± 62.4 ms" in body
        assert "15,826.4 ms (2 results so far, too few for a spread)" in body
        assert "62.4314" not in body and body.count("± 62.4") == 1


def test_it_draws_the_emails_levels_over_the_results_each_holds(team: Any) -> None:
    """The email's chart draws the levels the alert page draws: before from the first result to
    the last good one, after from the first bad one, each at the median of what it spans."""
    from statistics import median

    from accelboard.notifications import selectors

    alert = latency_regression(team, runs_before=12, runs_after=3)
    times, values, (before, after) = selectors.alert_chart_series(alert=alert)
    assert before is not None and after is not None
    assert (before.start, before.end) == (times[0], times[11])
    assert (after.start, after.end) == (times[12], times[-1])
    assert before.level == median(values[:12]) and after.level == median(values[12:])
