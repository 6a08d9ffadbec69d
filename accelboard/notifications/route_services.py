"""Writes of alert routes: adding and removing routes, planning and sending their messages.

Routes send what emails send, to a channel (``route_payloads``), in the same two steps:

1. **Plan** (``route_deliveries_plan``): under the notifications planning lock, the open alerts
   each route has not carried yet are grouped (one message per change, one PagerDuty event per
   alert) and written as ``RouteDelivery`` rows with their items in one transaction; PagerDuty
   and webhook routes also get a ``resolve`` delivery for each alert they were sent that has
   since been resolved or dismissed. The unique (route, alert, event) item makes a second planner harmless.
2. **Send** (``route_delivery_send``): the delivery is claimed with a conditional ``UPDATE``;
   the payload is built, POSTed (``route_http``) and the answer recorded (status, body cut to
   2,000 characters). 429, 5xx and network failures are retried with backoff, honouring
   ``Retry-After`` (``RouteRetry`` carries the delay to the task); other 4xx are final.

Adding a route checks its target before anything is stored (``TargetError`` becomes a
``ValidationError`` naming the field): a malformed URL, a Slack URL that is not an incoming
webhook, a routing key of the wrong shape, and, with ``ROUTE_PUBLIC_ONLY`` (production), a host
that resolves to a loopback, link-local or private address.
"""

from __future__ import annotations

import logging
import secrets as _secrets
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from accelboard.alerts.choices import AlertKind, AlertState, Severity
from accelboard.alerts.models import Alert
from accelboard.core.access import Action, can
from accelboard.core.models import Team

from . import content, links, route_http, selectors
from . import route_payloads as payloads
from .choices import DeliveryStatus, RouteChannel, RouteEvent, RouteKind
from .models import AlertRoute, RouteDelivery, RouteDeliveryItem
from .route_payloads import RouteAlert, RouteAlertRef, RouteMessage, RouteRef, TargetError
from .route_secrets import RouteSecretError, secret_open, secret_seal
from .services import _PLAN_LOCK, ALERT_MAX_AGE, BACKOFF_FIRST_S, BACKOFF_MAX_S, SETTLE

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
SENDING_STALE = timedelta(minutes=15)
PENDING_STALE = timedelta(minutes=5)
# A Retry-After longer than this is capped: a message an hour late is still worth sending.
RETRY_AFTER_MAX_S = 3600
# Channels told when an alert they were sent is resolved or dismissed (chat messages stay as sent).
CLOSING_CHANNELS = (RouteChannel.PAGERDUTY, RouteChannel.WEBHOOK)


class RouteRetry(Exception):
    """A transient failure, recorded; the task retries after ``countdown`` seconds."""

    def __init__(self, message: str, *, countdown: float) -> None:
        super().__init__(message)
        self.countdown = countdown


# --- routes -----------------------------------------------------------------------------------


def route_can_manage(*, user: Any, route: AlertRoute) -> bool:
    """A personal route: its owner. A team route: the team's leads and staff (``MANAGE``)."""
    if route.user_id is not None:
        return bool(route.user_id == user.pk)
    return can(user, Action.MANAGE, route.team_id)


def _target(*, channel: str, url: str, routing_key: str) -> tuple[dict[str, str], str]:
    """(secret values, hint) for a channel's target; raises ``TargetError`` naming the field."""
    if channel == RouteChannel.PAGERDUTY:
        key = payloads.pagerduty_key_check(routing_key)
        return {"routing_key": key}, f"Events API v2 key {payloads.mask_key(key)}"
    if channel == RouteChannel.SLACK:
        checked = payloads.slack_url_check(url, prefixes=settings.ROUTE_SLACK_URL_PREFIXES)
    else:
        checked = payloads.url_check(url, https_only=settings.ROUTE_PUBLIC_ONLY)
    values = {"url": checked}
    if channel == RouteChannel.WEBHOOK:
        values["signing_secret"] = "whsec_" + _secrets.token_urlsafe(32)
    return values, payloads.mask_url(checked)


def _public_check(values: dict[str, str]) -> None:
    if not settings.ROUTE_PUBLIC_ONLY or "url" not in values:
        return
    from urllib.parse import urlsplit

    parts = urlsplit(values["url"])
    route_http.resolve_public(parts.hostname or "", parts.port or 443)


def route_create(
    *,
    user: Any,
    team: Team,
    name: str,
    channel: str,
    kind: str = "",
    min_severity: str = Severity.WARNING,
    url: str = "",
    routing_key: str = "",
    personal: bool = False,
) -> tuple[AlertRoute, str]:
    """Add a route; returns it and, for a webhook, its signing secret (shown once).

    Raises ``ValidationError`` naming the field; nothing is stored then."""
    allowed = can(user, Action.SUBSCRIBE, team) if personal else can(user, Action.MANAGE, team)
    if not allowed:
        who = "members" if personal else "leads"
        raise ValidationError({"team": f"Only {team.name}'s {who} (and staff) can add this route."})
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Give the route a name (e.g. #inference-alerts)."})
    if len(name) > 80:
        raise ValidationError({"name": "The name is longer than 80 characters."})
    if channel not in RouteChannel.values:
        raise ValidationError(
            {"channel": f"Unknown channel {channel!r}: one of {', '.join(RouteChannel.values)}."}
        )
    if kind not in RouteKind.values:
        raise ValidationError({"kind": f"Unknown alert kind family {kind!r}."})
    if min_severity not in Severity.values:
        raise ValidationError({"min_severity": f"Unknown severity {min_severity!r}."})
    try:
        values, hint = _target(channel=channel, url=url, routing_key=routing_key)
        _public_check(values)
    except TargetError as exc:
        raise ValidationError({exc.field: str(exc)}) from None
    route = AlertRoute.objects.create(
        team=team,
        user=user if personal else None,
        name=name,
        channel=channel,
        kind=kind,
        min_severity=min_severity,
        secret=secret_seal(values),
        target_hint=hint,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return route, values.get("signing_secret", "")


def route_delete(*, user: Any, route: AlertRoute) -> None:
    if not route_can_manage(user=user, route=route):
        raise PermissionDenied("Only the route's owner (a team route: the team's leads) can remove it.")
    route.delete()


# --- planning ---------------------------------------------------------------------------------


def route_deliveries_plan(*, now: datetime | None = None, settle: timedelta = SETTLE) -> list[int]:
    """Write the route messages due now (openings and PagerDuty resolves); returns their ids."""
    now = now or timezone.now()
    ids: list[int] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PLAN_LOCK])
        # A personal route follows its owner's membership, as emails do.
        routes = list(
            AlertRoute.objects.filter(Q(user__isnull=True) | Q(team__memberships__user=F("user"))).distinct()
        )
        if not routes:
            return []
        since = max(min(r.created_at for r in routes), now - ALERT_MAX_AGE)
        alerts = list(
            Alert.objects.filter(
                state=AlertState.OPEN, team_id__in={r.team_id for r in routes}, opened_at__gte=since
            )
            .select_related("first_run")
            .only("id", "team_id", "kind", "severity", "opened_at", "first_run__git_commit")
        )
        delivered = set(
            RouteDeliveryItem.objects.filter(
                event=RouteEvent.TRIGGER, alert_id__in=[a.pk for a in alerts]
            ).values_list("route_id", "alert_id")
        )
        groups = payloads.route_groups(
            routes=[
                RouteRef(r.pk, r.team_id, r.channel, r.kind, r.min_severity, r.created_at) for r in routes
            ],
            alerts=[
                RouteAlertRef(
                    a.pk,
                    a.team_id,
                    a.kind,
                    a.severity,
                    a.opened_at,
                    a.first_run.git_commit if a.first_run else "",
                )
                for a in alerts
            ],
            delivered=delivered,
            hold_after=now - settle,
        )
        for group in groups:
            ids.append(
                _delivery_write(
                    route_id=group.route_id,
                    event=RouteEvent.TRIGGER,
                    key=group.key,
                    alert_ids=group.alert_ids,
                )
            )
        # PagerDuty and webhooks: close what they were sent once the alert is resolved or dismissed.
        closing = set(
            RouteDeliveryItem.objects.filter(
                event=RouteEvent.TRIGGER,
                route__channel__in=CLOSING_CHANNELS,
                alert__state__in=[AlertState.RESOLVED, AlertState.DISMISSED],
                delivery__status=DeliveryStatus.SENT,
            ).values_list("route_id", "alert_id")
        )
        if closing:
            closed = set(
                RouteDeliveryItem.objects.filter(
                    event=RouteEvent.RESOLVE, alert_id__in={a for _, a in closing}
                ).values_list("route_id", "alert_id")
            )
            for route_id, alert_id in sorted(closing - closed):
                ids.append(
                    _delivery_write(
                        route_id=route_id,
                        event=RouteEvent.RESOLVE,
                        key=f"alert:{alert_id}",
                        alert_ids=[alert_id],
                    )
                )
    return ids


def _delivery_write(*, route_id: int, event: str, key: str, alert_ids: list[int]) -> int:
    delivery = RouteDelivery.objects.create(route_id=route_id, event=event, group_key=key[:120])
    RouteDeliveryItem.objects.bulk_create(
        [RouteDeliveryItem(delivery=delivery, alert_id=a, route_id=route_id, event=event) for a in alert_ids]
    )
    return delivery.pk


# --- the message ------------------------------------------------------------------------------


def _route_alert(alert: Alert, facts: content.AlertFacts) -> RouteAlert:
    chart = ""
    if alert.series_id is not None and facts.first_run is not None and facts.kind in content.SERIES_KINDS:
        chart = links.absolute(links.chart_path(alert.pk))
    return RouteAlert(
        id=alert.pk,
        kind=alert.kind,
        kind_label=AlertKind(alert.kind).label if alert.kind in AlertKind.values else alert.kind,
        severity=alert.severity,
        severity_label=facts.severity_label,
        state=alert.state,
        team=facts.team,
        headline=content.what_moved(facts),
        where=content.setup_line(facts) or facts.host or facts.team,
        opened_at=alert.opened_at,
        url=facts.url,
        # A channel has no single reader to sign a triage link for: these open the alert's page
        # at its triage buttons (sign-in required).
        acknowledge_url=f"{facts.url}#acknowledge",
        dismiss_url=f"{facts.url}#dismiss",
        chart_url=chart,
        commit=facts.commit,
        evidence=tuple((row.label, row.text) for row in content.alert_rows(facts)),
    )


def _message(*, delivery: RouteDelivery, alerts: list[Alert], now: datetime) -> RouteMessage:
    by_id = {a.pk: a for a in alerts}
    ordered_facts = content.worst_first([selectors.alert_facts(alert=a) for a in alerts])
    items = [_route_alert(by_id[f.id], f) for f in ordered_facts]
    summary = content.subject_for(alerts=ordered_facts, digest=False)
    if delivery.event == RouteEvent.RESOLVE:
        summary = f"Closed: {summary}"
    return RouteMessage(
        event=delivery.event,
        summary=summary,
        alerts=tuple(items),
        delivery_id=delivery.pk,
        sent_at=now,
        route_name=delivery.route.name,
    )


def _test_message(*, delivery: RouteDelivery, now: datetime) -> RouteMessage:
    route = delivery.route
    url = links.absolute(links.routes_path())
    sample = RouteAlert(
        id=0,
        kind="regression",
        kind_label="Test",
        severity="info",
        severity_label="Info",
        state="open",
        team=route.team.name,
        headline=f"Test message from accelboard for the route “{route.name}”",
        where=route.team.name,
        opened_at=now,
        url=url,
        acknowledge_url=url,
        dismiss_url=url,
    )
    return RouteMessage(
        event=RouteEvent.TEST,
        summary=f"accelboard test: route “{route.name}” works",
        alerts=(sample,),
        delivery_id=delivery.pk,
        sent_at=now,
        route_name=route.name,
    )


def _request(*, route: AlertRoute, message: RouteMessage) -> tuple[str, bytes, dict[str, str]]:
    """(URL, body, headers) of one delivery."""
    values = secret_open(route.secret)
    if route.channel == RouteChannel.PAGERDUTY:
        event = payloads.pagerduty_event(
            message, routing_key=values["routing_key"], source=settings.SITE_URL.split("://", 1)[-1]
        )
        return settings.ROUTE_PAGERDUTY_URL, payloads.body_bytes(event), {}
    if route.channel == RouteChannel.SLACK:
        return values["url"], payloads.body_bytes(payloads.slack_payload(message)), {}
    if route.channel == RouteChannel.TEAMS:
        return values["url"], payloads.body_bytes(payloads.teams_payload(message)), {}
    body = payloads.body_bytes(payloads.webhook_payload(message))
    header = payloads.signature_header(secret=values["signing_secret"], body=body, timestamp=int(time.time()))
    return values["url"], body, {payloads.SIGNATURE_HEADER: header}


# --- sending ----------------------------------------------------------------------------------


def _backoff(attempts: int) -> float:
    return float(min(BACKOFF_FIRST_S * 2 ** max(attempts - 1, 0), BACKOFF_MAX_S))


def _claim(*, delivery_id: int, now: datetime) -> bool:
    claimable = (
        Q(status=DeliveryStatus.PENDING)
        | Q(status=DeliveryStatus.FAILED, attempts__lt=MAX_ATTEMPTS, next_attempt_at__isnull=False)
        | Q(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE)
    )
    changed = (
        RouteDelivery.objects.filter(claimable, pk=delivery_id)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(status=DeliveryStatus.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    )
    return changed == 1


def route_delivery_send(*, delivery_id: int, now: datetime | None = None, force: bool = False) -> str:
    """Send one planned route message; returns the delivery's status afterwards.

    ``force`` ignores the backoff time (a retry the task scheduled is due). Raises ``RouteRetry``
    after recording a transient failure that has attempts left."""
    now = now or timezone.now()
    if force:
        RouteDelivery.objects.filter(
            pk=delivery_id, status=DeliveryStatus.FAILED, next_attempt_at__isnull=False
        ).update(next_attempt_at=now)
    if not _claim(delivery_id=delivery_id, now=now):
        status = RouteDelivery.objects.filter(pk=delivery_id).values_list("status", flat=True).first()
        return status or "missing"
    delivery = RouteDelivery.objects.select_related("route__team").get(pk=delivery_id)
    if delivery.event == RouteEvent.TEST:
        message = _test_message(delivery=delivery, now=now)
    else:
        alert_ids = list(delivery.items.values_list("alert_id", flat=True))
        alerts = selectors.alerts_for_email(
            alert_ids=alert_ids, open_only=delivery.event == RouteEvent.TRIGGER
        )
        if not alerts:
            RouteDelivery.objects.filter(pk=delivery.pk).update(
                status=DeliveryStatus.SKIPPED,
                last_error="every alert was acknowledged, dismissed or resolved before sending",
            )
            return DeliveryStatus.SKIPPED
        message = _message(delivery=delivery, alerts=alerts, now=now)
    try:
        url, body, headers = _request(route=delivery.route, message=message)
        answer = route_http.post_json(
            url,
            body,
            headers=headers,
            timeout=settings.ROUTE_TIMEOUT_S,
            public_only=settings.ROUTE_PUBLIC_ONLY,
        )
    except (TargetError, RouteSecretError) as exc:
        # Not worth retrying: the target is refused or its secret unreadable.
        RouteDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.FAILED,
            last_error=str(exc)[:2000],
            next_attempt_at=None,
            summary=message.summary[:300],
        )
        return DeliveryStatus.FAILED
    fields: dict[str, Any] = {
        "response_status": answer.status,
        "response_body": answer.body,
        "summary": message.summary[:300],
    }
    if answer.ok:
        RouteDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.SENT, sent_at=timezone.now(), last_error="", next_attempt_at=None, **fields
        )
        return DeliveryStatus.SENT
    error = answer.error or f"HTTP {answer.status}: {answer.body[:200]}"
    retry = answer.transient and delivery.attempts < MAX_ATTEMPTS and delivery.event != RouteEvent.TEST
    delay = (
        min(answer.retry_after, RETRY_AFTER_MAX_S)
        if answer.retry_after is not None
        else _backoff(delivery.attempts)
    )
    RouteDelivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.FAILED,
        last_error=error[:2000],
        next_attempt_at=now + timedelta(seconds=delay) if retry else None,
        **fields,
    )
    log.warning("route delivery %s attempt %s failed: %s", delivery.pk, delivery.attempts, error)
    if retry:
        raise RouteRetry(error, countdown=delay)
    return DeliveryStatus.FAILED


def route_deliveries_due(*, now: datetime | None = None) -> list[int]:
    """Route deliveries a retry pass should send: failed and due, pending too long, lost mid-send."""
    now = now or timezone.now()
    return list(
        RouteDelivery.objects.filter(
            Q(status=DeliveryStatus.FAILED, attempts__lt=MAX_ATTEMPTS, next_attempt_at__lte=now)
            | Q(status=DeliveryStatus.PENDING, created_at__lt=now - PENDING_STALE)
            | Q(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE)
        )
        .exclude(event=RouteEvent.TEST)
        .order_by("created_at")
        .values_list("pk", flat=True)
    )


def route_test_send(*, user: Any, route: AlertRoute) -> RouteDelivery:
    """The routes page's "send a test": one test message now (not through a worker: the point is
    to see the channel's answer), recorded in the delivery log like any other."""
    if not route_can_manage(user=user, route=route):
        raise PermissionDenied("Only the route's owner (a team route: the team's leads) can test it.")
    delivery = RouteDelivery.objects.create(route=route, event=RouteEvent.TEST, group_key="test")
    try:
        route_delivery_send(delivery_id=delivery.pk)
    except RouteRetry:
        pass  # recorded on the delivery; a test is not retried
    delivery.refresh_from_db()
    return delivery
