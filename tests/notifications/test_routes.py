"""Alert routes against loopback servers that answer as Slack, PagerDuty, Teams and a webhook
receiver do (``route_servers``): what they receive, what the delivery log keeps, bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from accelboard.alerts.services import alert_resolve
from accelboard.notifications import route_services
from accelboard.notifications.choices import DeliveryStatus, RouteEvent
from accelboard.notifications.models import AlertRoute, RouteDelivery
from accelboard.notifications.route_secrets import secret_open

from .conftest import regression_alert, runs_and_series
from .route_servers import SLACK_HOOK_PATH, FakeService

pytestmark = pytest.mark.django_db

PD_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"


@pytest.fixture
def route_settings(settings: Any, slack: FakeService, pagerduty: FakeService) -> Any:
    settings.ROUTE_SLACK_URL_PREFIXES = [f"{slack.base}/services/"]
    settings.ROUTE_PAGERDUTY_URL = f"{pagerduty.base}/v2/enqueue"
    settings.ROUTE_PUBLIC_ONLY = False
    settings.SITE_URL = "https://accelboard.example.com"
    return settings


def _backdate(route: AlertRoute) -> AlertRoute:
    AlertRoute.objects.filter(pk=route.pk).update(created_at=datetime.now(UTC) - timedelta(hours=6))
    route.refresh_from_db()
    return route


def _slack_route(team: Any, lead: Any, slack: FakeService, **kw: Any) -> AlertRoute:
    route, _ = route_services.route_create(
        user=lead, team=team, name="#inference", channel="slack", url=slack.base + SLACK_HOOK_PATH, **kw
    )
    return _backdate(route)


def _send_all() -> list[str]:
    return [route_services.route_delivery_send(delivery_id=i) for i in route_services.route_deliveries_plan()]


def test_it_stores_the_route_secret_encrypted(
    team: Any, lead: Any, route_settings: Any, slack: FakeService
) -> None:
    route = _slack_route(team, lead, slack)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret, target_hint FROM notifications_alertroute WHERE id = %s", [route.pk])
        stored, hint = cursor.fetchone()
    assert SLACK_HOOK_PATH not in stored and "XXXX" not in stored
    assert stored.startswith("gAAAA")  # a Fernet token
    assert secret_open(stored) == {"url": slack.base + SLACK_HOOK_PATH}
    assert hint == f"{slack.base}/services/…"


def test_it_posts_one_slack_message_per_commit_with_what_the_email_says(
    team: Any, lead: Any, route_settings: Any, slack: FakeService
) -> None:
    _slack_route(team, lead, slack)
    good, bad, series = runs_and_series(team, commit="feedface00112233")
    first = regression_alert(team=team, series=series, first_run=bad, last_good_run=good, pct_change=-12.0)

    assert _send_all() == [DeliveryStatus.SENT]

    (request,) = slack.requests
    body = request.json()
    assert request.headers["content-type"] == "application/json"
    assert body["text"] == body["blocks"][0]["text"]["text"]
    section = body["blocks"][1]["text"]["text"]
    assert "-12.0%" in section and "*Where:*" in section and "*Since:*" in section and "`feedface`" in section
    assert body["blocks"][2]["type"] == "image"
    assert "/notifications/charts/" in body["blocks"][2]["image_url"]
    buttons = {e["text"]["text"]: e["url"] for e in body["blocks"][3]["elements"]}
    assert buttons["Open"] == f"https://accelboard.example.com/alerts/{first.pk}/"
    assert buttons["Acknowledge"].endswith(f"/alerts/{first.pk}/#acknowledge")
    delivery = RouteDelivery.objects.get()
    assert (delivery.status, delivery.response_status, delivery.response_body) == ("sent", 200, "ok")
    assert list(delivery.items.values_list("alert_id", flat=True)) == [first.pk]
    # Planned once: a second pass finds nothing new.
    assert route_services.route_deliveries_plan() == []


def test_it_filters_by_minimum_severity_and_kind(
    team: Any, lead: Any, route_settings: Any, slack: FakeService
) -> None:
    _slack_route(team, lead, slack, min_severity="critical")
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good, severity="warning")
    assert route_services.route_deliveries_plan() == []
    drift_only = _slack_route(team, lead, slack, kind="drift", min_severity="info")
    assert route_services.route_deliveries_plan() == []
    assert not RouteDelivery.objects.filter(route=drift_only).exists()


@pytest.mark.parametrize(
    ("status", "body", "headers", "retried"),
    [
        (400, "invalid_payload", {}, False),
        (404, "no_service", {}, False),
        (429, "rate_limited", {"Retry-After": "7"}, True),
        (503, "service unavailable", {}, True),
    ],
)
def test_it_records_slack_errors_and_retries_only_transient_ones(
    team: Any,
    lead: Any,
    route_settings: Any,
    slack: FakeService,
    status: int,
    body: str,
    headers: dict[str, str],
    retried: bool,
) -> None:
    _slack_route(team, lead, slack)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    slack.script.append((status, body, headers))
    (delivery_id,) = route_services.route_deliveries_plan()
    before = datetime.now(UTC)

    if retried:
        with pytest.raises(route_services.RouteRetry) as caught:
            route_services.route_delivery_send(delivery_id=delivery_id, now=before)
        assert caught.value.countdown == (7.0 if headers else route_services.BACKOFF_FIRST_S)
    else:
        assert (
            route_services.route_delivery_send(delivery_id=delivery_id, now=before) == DeliveryStatus.FAILED
        )

    delivery = RouteDelivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.response_status, delivery.response_body) == ("failed", status, body)
    assert f"HTTP {status}" in delivery.last_error
    if retried:
        assert delivery.next_attempt_at == before + timedelta(seconds=caught.value.countdown)
        assert route_services.route_deliveries_due(now=delivery.next_attempt_at) == [delivery_id]
        # The retry goes through: Slack answers ok now.
        assert route_services.route_delivery_send(delivery_id=delivery_id, force=True) == DeliveryStatus.SENT
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.response_body) == ("sent", 2, "ok")
        assert len(slack.requests) == 2
    else:
        assert delivery.next_attempt_at is None
        assert route_services.route_deliveries_due(now=before + timedelta(days=1)) == []


def test_it_triggers_and_resolves_a_pagerduty_incident_per_alert(
    team: Any, lead: Any, route_settings: Any, pagerduty: FakeService
) -> None:
    route, _ = route_services.route_create(
        user=lead, team=team, name="on-call", channel="pagerduty", routing_key=PD_KEY
    )
    _backdate(route)
    good, bad, series = runs_and_series(team)
    alert = regression_alert(team=team, series=series, first_run=bad, last_good_run=good, severity="critical")

    assert _send_all() == [DeliveryStatus.SENT]
    trigger = pagerduty.requests[0].json()
    assert pagerduty.requests[0].path == "/v2/enqueue"
    assert trigger["routing_key"] == PD_KEY
    assert (trigger["event_action"], trigger["dedup_key"]) == ("trigger", f"accelboard-alert-{alert.pk}")
    assert trigger["payload"]["severity"] == "critical"
    delivery = RouteDelivery.objects.get()
    assert delivery.response_status == 202 and '"status": "success"' in delivery.response_body

    alert_resolve(alert=alert, user=lead)
    assert _send_all() == [DeliveryStatus.SENT]
    resolve = pagerduty.requests[1].json()
    assert resolve == {
        "routing_key": PD_KEY,
        "event_action": "resolve",
        "dedup_key": f"accelboard-alert-{alert.pk}",
    }
    assert RouteDelivery.objects.filter(event=RouteEvent.RESOLVE, status="sent").count() == 1
    assert route_services.route_deliveries_plan() == []


@pytest.mark.parametrize(
    ("status", "body", "headers", "retried"),
    [
        (
            400,
            '{"status":"invalid event","message":"Event object is invalid","errors":["Length of \'routing_key\' is incorrect"]}',
            {},
            False,
        ),
        (429, "", {"Retry-After": "30"}, True),
    ],
)
def test_pagerduty_errors_are_recorded_and_only_a_429_is_retried(
    team: Any,
    lead: Any,
    route_settings: Any,
    pagerduty: FakeService,
    status: int,
    body: str,
    headers: dict[str, str],
    retried: bool,
) -> None:
    route, _ = route_services.route_create(
        user=lead, team=team, name="on-call", channel="pagerduty", routing_key=PD_KEY
    )
    _backdate(route)
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    pagerduty.script.append((status, body, headers))
    (delivery_id,) = route_services.route_deliveries_plan()
    if retried:
        with pytest.raises(route_services.RouteRetry) as caught:
            route_services.route_delivery_send(delivery_id=delivery_id)
        assert caught.value.countdown == 30.0
    else:
        assert route_services.route_delivery_send(delivery_id=delivery_id) == DeliveryStatus.FAILED
    delivery = RouteDelivery.objects.get()
    assert (delivery.status, delivery.response_status, delivery.response_body) == ("failed", status, body)
    assert (delivery.next_attempt_at is not None) is retried


def test_it_signs_webhooks_and_the_receiver_verifies_them(
    team: Any, lead: Any, route_settings: Any, webhook_receiver: FakeService
) -> None:
    route, secret = route_services.route_create(
        user=lead,
        team=team,
        name="ops hook",
        channel="webhook",
        url=webhook_receiver.base + "/hooks/accelboard",
    )
    assert secret.startswith("whsec_") and len(secret) > 40
    webhook_receiver.secret = secret
    _backdate(route)
    good, bad, series = runs_and_series(team)
    alert = regression_alert(team=team, series=series, first_run=bad, last_good_run=good)

    assert _send_all() == [DeliveryStatus.SENT]
    (request,) = webhook_receiver.requests
    assert request.path == "/hooks/accelboard"
    assert request.headers["accelboard-signature"].startswith("t=")
    body = request.json()
    assert body["type"] == "alerts.opened" and [a["id"] for a in body["alerts"]] == [alert.pk]
    assert RouteDelivery.objects.get().response_status == 204

    # Resolving the alert tells the webhook (signed as well).
    alert_resolve(alert=alert, user=lead)
    assert _send_all() == [DeliveryStatus.SENT]
    closed = webhook_receiver.requests[1].json()
    assert closed["type"] == "alerts.closed"
    assert [(a["id"], a["state"]) for a in closed["alerts"]] == [(alert.pk, "resolved")]

    # A receiver with another secret refuses it: the delivery log keeps its 401.
    webhook_receiver.secret = "whsec_other"
    test = route_services.route_test_send(user=lead, route=route)
    assert (test.status, test.response_status) == ("failed", 401)
    assert "does not match" in test.response_body


def test_it_posts_an_adaptive_card_to_a_teams_workflow(
    team: Any, lead: Any, route_settings: Any, teams: FakeService
) -> None:
    route, _ = route_services.route_create(
        user=lead,
        team=team,
        name="Teams",
        channel="teams",
        url=teams.base + "/workflows/abc/triggers/manual/paths/invoke",
    )
    delivery = route_services.route_test_send(user=lead, route=route)
    assert (delivery.status, delivery.response_status) == ("sent", 202)
    card = teams.requests[0].json()["attachments"][0]["content"]
    assert card["type"] == "AdaptiveCard"
    assert "route “Teams” works" in card["body"][0]["text"]


@pytest.mark.parametrize(
    ("channel", "fields", "field", "message"),
    [
        ("slack", {"url": "not a url"}, "url", "not a URL"),
        ("slack", {"url": "https://example.com/services/T/B/X"}, "url", "not a Slack incoming webhook"),
        ("webhook", {"url": "ftp://example.com/x"}, "url", "must start with"),
        ("teams", {"url": ""}, "url", "Enter the webhook URL"),
        ("pagerduty", {"routing_key": "abc"}, "routing_key", "32 letters and digits"),
        ("pagerduty", {"routing_key": "x" * 31 + "!"}, "routing_key", "32 letters and digits"),
        ("sms", {}, "channel", "Unknown channel"),
    ],
)
def test_bad_targets_are_refused_naming_the_field_and_nothing_is_stored(
    team: Any, lead: Any, route_settings: Any, channel: str, fields: dict[str, str], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        route_services.route_create(user=lead, team=team, name="x", channel=channel, **fields)
    assert list(caught.value.message_dict) == [field]
    assert message in caught.value.message_dict[field][0]
    assert AlertRoute.objects.count() == 0


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.8/hook",
        "https://[::1]/hook",
    ],
)
def test_in_production_a_route_to_an_internal_address_is_refused(
    team: Any, lead: Any, settings: Any, url: str
) -> None:
    settings.ROUTE_PUBLIC_ONLY = True
    with pytest.raises(ValidationError) as caught:
        route_services.route_create(user=lead, team=team, name="x", channel="webhook", url=url)
    assert "loopback, link-local or private" in caught.value.message_dict["url"][0]
    assert AlertRoute.objects.count() == 0


def test_in_production_a_webhook_must_be_https(team: Any, lead: Any, settings: Any) -> None:
    settings.ROUTE_PUBLIC_ONLY = True
    with pytest.raises(ValidationError) as caught:
        route_services.route_create(
            user=lead, team=team, name="x", channel="webhook", url="http://example.com/hook"
        )
    assert "https://" in caught.value.message_dict["url"][0]


def test_a_route_whose_address_became_internal_is_not_sent_to(
    team: Any, lead: Any, route_settings: Any, webhook_receiver: FakeService
) -> None:
    route, _ = route_services.route_create(
        user=lead, team=team, name="hook", channel="webhook", url=webhook_receiver.base + "/h"
    )
    route_settings.ROUTE_PUBLIC_ONLY = True
    delivery = route_services.route_test_send(user=lead, route=route)
    assert delivery.status == "failed" and "loopback, link-local or private" in delivery.last_error
    assert webhook_receiver.requests == []


def test_only_leads_add_team_routes_and_members_add_personal_ones(
    team: Any, lead: Any, engineer: Any, other_lead: Any, route_settings: Any, slack: FakeService
) -> None:
    url = slack.base + SLACK_HOOK_PATH
    with pytest.raises(ValidationError) as caught:
        route_services.route_create(user=engineer, team=team, name="x", channel="slack", url=url)
    assert "leads" in caught.value.message_dict["team"][0]
    mine, _ = route_services.route_create(
        user=engineer, team=team, name="me", channel="slack", url=url, personal=True
    )
    assert mine.user_id == engineer.pk
    with pytest.raises(ValidationError):
        route_services.route_create(
            user=other_lead, team=team, name="x", channel="slack", url=url, personal=True
        )
    assert not route_services.route_can_manage(user=lead, route=mine)
    assert route_services.route_can_manage(user=engineer, route=mine)


def test_a_personal_route_stops_when_its_owner_leaves_the_team(
    team: Any, lead: Any, engineer: Any, route_settings: Any, slack: FakeService
) -> None:
    route, _ = route_services.route_create(
        user=engineer,
        team=team,
        name="mine",
        channel="slack",
        url=slack.base + SLACK_HOOK_PATH,
        personal=True,
    )
    _backdate(route)
    engineer.memberships.all().delete()
    good, bad, series = runs_and_series(team)
    regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    assert route_services.route_deliveries_plan() == []
    assert slack.requests == []


def test_secrets_sealed_with_an_old_key_are_read_after_rotation(settings: Any) -> None:
    from accelboard.notifications.route_secrets import RouteSecretError, secret_seal

    settings.ROUTE_SECRET_KEY = "old-key-" + "x" * 50
    settings.ROUTE_SECRET_KEYS_OLD = []
    sealed = secret_seal({"url": "https://hooks.slack.com/services/T/B/X"})
    settings.ROUTE_SECRET_KEY = "new-key-" + "y" * 50
    with pytest.raises(RouteSecretError, match="ROUTE_SECRET_KEYS_OLD"):
        secret_open(sealed)
    settings.ROUTE_SECRET_KEYS_OLD = ["old-key-" + "x" * 50]
    assert secret_open(sealed) == {"url": "https://hooks.slack.com/services/T/B/X"}
