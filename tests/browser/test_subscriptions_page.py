"""The alert-email subscriptions page in Chromium: empty state, add, change mode, remove."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.benchmarks.models import Series
from accelboard.notifications.models import Subscription
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_adds_changes_and_removes_subscriptions(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any, other_team: Any
) -> None:
    now = datetime.now(UTC)
    factories.run_create(team=team, started_at=now - timedelta(hours=2))
    factories.run_create(team=other_team, started_at=now - timedelta(hours=2), model="Mistral-7B")
    series = Series.objects.get(team=team, metric="latency_p99_ms")
    login(page, lead)

    page.goto("/notifications/subscriptions/")
    assert page.locator("#no-subscriptions").is_visible()
    assert "Nobody is subscribed by default" in page.locator("#no-subscriptions").inner_text()
    options = page.locator("#id_series option").all_inner_texts()
    assert any("latency_p99_ms" in o for o in options)
    assert not any("Mistral" in o for o in options)  # another team's series is not offered
    screenshot(page, "subscriptions-empty")

    # A digest for one series.
    page.select_option("#id_team", label="Inference Platform")
    page.select_option("#id_series", value=str(series.pk))
    page.select_option("#id_mode", value="digest")
    with page.expect_navigation():
        page.click("#add-subscription button[type=submit]")
    assert "Subscribed: Inference Platform: series" in page.locator(".messages").inner_text()
    row = page.locator("tr[data-subscription] >> text=latency_p99_ms")
    assert row.count() == 1
    sub = Subscription.objects.get(user=lead)
    assert (sub.series_id, sub.mode) == (series.pk, "digest")

    # The whole team in one click.
    with page.expect_navigation():
        page.click("#subscribe-my-teams")
    assert page.locator("#subscriptions tbody tr").count() == 2
    team_sub = Subscription.objects.get(user=lead, series__isnull=True)
    assert team_sub.mode == "immediate"

    # Change the series subscription to immediate.
    series_row = page.locator(f'tr[data-subscription="{sub.pk}"]')
    series_row.locator("select[name=mode]").select_option("immediate")
    with page.expect_navigation():
        series_row.locator("button", has_text="Save").click()
    sub.refresh_from_db()
    assert sub.mode == "immediate"
    assert "now immediately" in page.locator(".messages").inner_text()
    screenshot(page, "subscriptions-two")

    # Remove the team subscription.
    with page.expect_navigation():
        page.locator(f'tr[data-subscription="{team_sub.pk}"] button', has_text="Remove").click()
    assert not Subscription.objects.filter(pk=team_sub.pk).exists()
    assert page.locator("#subscriptions tbody tr").count() == 1
    assert page.js_errors == []


def test_it_renders_the_alert_email_and_unsubscribes_from_its_link(
    page: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    from urllib.parse import urlsplit

    from accelboard.alerts.models import Alert
    from accelboard.notifications import emails, links, selectors, services

    now = datetime.now(UTC)
    good = factories.run_create(team=team, started_at=now - timedelta(hours=3), git_commit="a1" * 20)
    bad = factories.run_create(team=team, started_at=now - timedelta(hours=1), git_commit="b2" * 20)
    sub = services.subscription_create(user=lead, team=team, mode="immediate")
    alerts = []
    for metric, pct in (("throughput_tokens_per_s", -12.4), ("latency_p99_ms", 9.1)):
        series = Series.objects.get(team=team, metric=metric)
        alerts.append(
            Alert.objects.create(
                team=team,
                kind="regression",
                severity="critical" if pct < 0 else "warning",
                title=f"{metric} {pct:+.1f}%",
                series=series,
                dedupe_key=f"browser:{metric}",
                first_run=bad,
                last_good_run=good,
                before_mean=100.0,
                before_spread=1.5,
                after_mean=100.0 * (1 + pct / 100),
                after_spread=2.0,
                pct_change=pct,
                confidence=0.99,
                opened_at=now,
            )
        )
    token = links.unsubscribe_token(user_id=lead.pk, subscription_id=sub.pk)
    loaded = selectors.alerts_for_email(alert_ids=[a.pk for a in alerts])
    message = emails.message_build(
        to=lead.email, user_id=lead.pk, alerts=loaded, mode="immediate", token=token
    )
    assert message.subject == (
        f"[Critical] 2 regressions in {'b2' * 4}: Output tokens per second -12% on Llama-3.1-8B bf16, and 1 more"
    )
    page.set_content(message.alternatives[0][0])
    assert page.locator("text=Open the alert").count() == 2
    assert page.locator("a.acknowledge").count() == 2 and page.locator("a.dismiss").count() == 2
    assert page.locator("text=a1a1a1a1..b2b2b2b2").count() == 2  # each alert's commit range
    screenshot(page, "alert-email")

    # The unsubscribe link, opened without a session, then its one button.
    page.goto(urlsplit(links.absolute(links.unsubscribe_path(token))).path)
    assert "Inference Platform: all alerts" in page.locator("main").inner_text()
    with page.expect_navigation():
        page.click("#unsubscribe")
    assert "Unsubscribed" in page.locator("h1").inner_text()
    assert not Subscription.objects.filter(pk=sub.pk).exists()
