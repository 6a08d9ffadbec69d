"""What an alert route sends, and which alerts it sends: pure functions on plain data (no ORM).

A route (``models.AlertRoute``) sends a team's alerts to a channel: Slack, Microsoft Teams,
PagerDuty or a generic webhook. This module holds everything about it that is computation:

1. **Matching** (``route_matches``): an alert of the route's team, opened after the route was
   made, of the route's kind family (regression: benchmark regressions and improvements; drift;
   production: SLO, throughput, energy, memory, throttling, XID/ECC) or of any kind, and at least
   as severe as the route's minimum.
2. **Grouping** (``route_groups``): one message per change, as emails are: the alerts one commit
   opened share one message; an alert without a commit is its own. PagerDuty gets one event per
   alert (each alert is one incident, ``dedup_key`` its id). A commit whose newest alert is
   younger than ``hold_after`` is held back whole (the detector may still be opening alerts).
3. **Payloads**: a Slack Block Kit message, a Teams Adaptive Card (workflow webhook), a PagerDuty
   Events API v2 event, the generic webhook's JSON (docs/alerts-routes.md), each from one
   ``RouteMessage`` holding what the email says: the headline with the numbers, where, since
   when, the chart as an image link, acknowledge, dismiss and open links.
4. **Signing** the generic webhook: HMAC-SHA256 over ``"<unix time>.<body>"`` with the route's
   secret, sent as ``Accelboard-Signature: t=<unix time>,v1=<hex>``; a receiver refuses a
   signature older than its replay window (``signature_verify``), as Slack and Stripe do.
5. **Checking targets**: a Slack incoming-webhook URL, a PagerDuty routing key (32 characters),
   a webhook URL, and whether an address is public (``address_is_public``: not loopback,
   link-local, private, reserved or multicast).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
# Alert kinds by route kind family.
KIND_FAMILY = {"regression": "regression", "improvement": "regression", "drift": "drift"}
PRODUCTION_FAMILY = "production"
SLACK_WEBHOOK_PREFIX = "https://hooks.slack.com/services/"
PAGERDUTY_KEY = re.compile(r"^[A-Za-z0-9]{32}$")
SIGNATURE_HEADER = "Accelboard-Signature"
# A receiver accepts a signature this many seconds old at most (docs/alerts-routes.md).
REPLAY_WINDOW_S = 300
# Slack shows at most 50 blocks; a commit's message lists its worst alerts and counts the rest.
ALERTS_PER_MESSAGE = 10
WEBHOOK_VERSION = 1


def kind_family(kind: str) -> str:
    """The route kind family of an alert kind: regression, drift or production."""
    return KIND_FAMILY.get(kind, PRODUCTION_FAMILY)


# --- matching and grouping --------------------------------------------------------------------


@dataclass(frozen=True)
class RouteRef:
    id: int
    team_id: int
    channel: str
    kind: str  # "" for every kind, else a family
    min_severity: str
    created_at: datetime


@dataclass(frozen=True)
class RouteAlertRef:
    id: int
    team_id: int
    kind: str
    severity: str
    opened_at: datetime
    commit: str = ""


@dataclass
class RouteGroup:
    route_id: int
    key: str
    alert_ids: list[int] = field(default_factory=list)


def route_matches(route: RouteRef, alert: RouteAlertRef) -> bool:
    if alert.team_id != route.team_id or alert.opened_at < route.created_at:
        return False
    if route.kind and kind_family(alert.kind) != route.kind:
        return False
    return SEVERITY_RANK.get(alert.severity, 9) <= SEVERITY_RANK.get(route.min_severity, 2)


def route_groups(
    *,
    routes: Iterable[RouteRef],
    alerts: Iterable[RouteAlertRef],
    delivered: set[tuple[int, int]],
    hold_after: datetime | None = None,
) -> list[RouteGroup]:
    """The messages to send: (route, alerts) groups not yet delivered, in a stable order."""
    alert_list = sorted(alerts, key=lambda a: (a.opened_at, a.id))
    if hold_after is not None:
        latest: dict[tuple[int, str], datetime] = {}
        for a in alert_list:
            commit_of = (a.team_id, a.commit or f"alert:{a.id}")
            latest[commit_of] = max(latest.get(commit_of, a.opened_at), a.opened_at)
        alert_list = [a for a in alert_list if latest[(a.team_id, a.commit or f"alert:{a.id}")] <= hold_after]
    groups: dict[tuple[int, str], RouteGroup] = {}
    for route in sorted(routes, key=lambda r: r.id):
        for alert in alert_list:
            if (route.id, alert.id) in delivered or not route_matches(route, alert):
                continue
            per_alert = route.channel == "pagerduty" or not alert.commit
            key = f"alert:{alert.id}" if per_alert else f"commit:{alert.commit}"
            group = groups.get((route.id, key))
            if group is None:
                group = groups[(route.id, key)] = RouteGroup(route_id=route.id, key=key)
            group.alert_ids.append(alert.id)
    return list(groups.values())


# --- what a message says ----------------------------------------------------------------------


@dataclass(frozen=True)
class RouteAlert:
    """One alert as a channel message needs it: plain strings and absolute links."""

    id: int
    kind: str
    kind_label: str
    severity: str
    severity_label: str
    state: str
    team: str
    headline: str  # what moved, with the numbers (the email's line)
    where: str  # model, variant, hardware, setup; or host
    opened_at: datetime
    url: str
    acknowledge_url: str
    dismiss_url: str
    chart_url: str = ""
    commit: str = ""
    evidence: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RouteMessage:
    """One delivery: ``event`` is trigger (alerts opened), resolve (closed) or test."""

    event: str
    summary: str  # the email's subject
    alerts: tuple[RouteAlert, ...]
    delivery_id: int
    sent_at: datetime
    route_name: str = ""


def _since(alert: RouteAlert) -> str:
    return f"{alert.opened_at:%Y-%m-%d %H:%M} UTC"


def _mrkdwn(text: str) -> str:
    """Slack's three control characters, escaped as Slack documents."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(message: RouteMessage) -> dict[str, Any]:
    """A Block Kit message for an incoming webhook: header, one section per alert (headline,
    where, since when, chart image), and its buttons (open, acknowledge, dismiss)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.summary[:150], "emoji": False}}
    ]
    shown = message.alerts[:ALERTS_PER_MESSAGE]
    for alert in shown:
        lines = [
            f"*{_mrkdwn(alert.severity_label)} · {_mrkdwn(alert.kind_label)}* — <{alert.url}|{_mrkdwn(alert.headline)}>",
            f"*Where:* {_mrkdwn(alert.where or alert.team)}",
            f"*Since:* {_since(alert)}"
            + (f" · commit `{_mrkdwn(alert.commit[:8])}`" if alert.commit else ""),
        ]
        lines += [f"*{_mrkdwn(label)}:* {_mrkdwn(text)}" for label, text in alert.evidence[:4]]
        section: dict[str, Any] = {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]},
        }
        blocks.append(section)
        if alert.chart_url:
            blocks.append(
                {
                    "type": "image",
                    "image_url": alert.chart_url,
                    "alt_text": f"{alert.headline}"[:2000],
                }
            )
        if message.event != "resolve":
            blocks.append(
                {
                    "type": "actions",
                    "elements": [
                        _slack_button("Open", alert.url, f"open-{alert.id}", style="primary"),
                        _slack_button("Acknowledge", alert.acknowledge_url, f"ack-{alert.id}"),
                        _slack_button("Dismiss", alert.dismiss_url, f"dismiss-{alert.id}", style="danger"),
                    ],
                }
            )
    rest = len(message.alerts) - len(shown)
    if rest > 0:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"and {rest} more alerts of this change"}],
            }
        )
    # ``text`` is the notification's and the screen reader's fallback.
    return {"text": message.summary, "blocks": blocks}


def _slack_button(text: str, url: str, action_id: str, *, style: str = "") -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "url": url,
        "action_id": action_id,
    }
    if style:
        button["style"] = style
    return button


def teams_payload(message: RouteMessage) -> dict[str, Any]:
    """An Adaptive Card (1.4) in the envelope a Teams workflow webhook ("When a Teams webhook
    request is received") posts to a channel."""
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": message.summary, "weight": "Bolder", "size": "Medium", "wrap": True}
    ]
    for alert in message.alerts[:ALERTS_PER_MESSAGE]:
        facts = [
            {"title": "Severity", "value": alert.severity_label},
            {"title": "Where", "value": alert.where or alert.team},
            {"title": "Since", "value": _since(alert)},
        ] + [{"title": label, "value": text} for label, text in alert.evidence[:4]]
        body.append({"type": "TextBlock", "text": alert.headline, "wrap": True, "separator": True})
        body.append({"type": "FactSet", "facts": facts})
        if alert.chart_url:
            body.append({"type": "Image", "url": alert.chart_url, "altText": alert.headline})
        body.append(
            {
                "type": "ActionSet",
                "actions": [
                    {"type": "Action.OpenUrl", "title": "Open", "url": alert.url},
                    {"type": "Action.OpenUrl", "title": "Acknowledge", "url": alert.acknowledge_url},
                    {"type": "Action.OpenUrl", "title": "Dismiss", "url": alert.dismiss_url},
                ],
            }
        )
    rest = len(message.alerts) - ALERTS_PER_MESSAGE
    if rest > 0:
        body.append({"type": "TextBlock", "text": f"and {rest} more alerts of this change", "isSubtle": True})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def pagerduty_dedup_key(alert_id: int) -> str:
    return f"accelboard-alert-{alert_id}"


def pagerduty_event(message: RouteMessage, *, routing_key: str, source: str) -> dict[str, Any]:
    """An Events API v2 event for the message's one alert: trigger when it opens, resolve when it
    is resolved or dismissed; ``dedup_key`` names the alert so that PagerDuty ties them."""
    alert = message.alerts[0]
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": "resolve" if message.event == "resolve" else "trigger",
        "dedup_key": pagerduty_dedup_key(alert.id),
    }
    if message.event == "resolve":
        return event
    event["payload"] = {
        "summary": f"{alert.headline} ({alert.where})"[:1024] if alert.where else alert.headline[:1024],
        "source": source,
        "severity": alert.severity if alert.severity in SEVERITY_RANK else "warning",
        "timestamp": alert.opened_at.isoformat(),
        "component": alert.where[:255],
        "group": alert.team,
        "class": alert.kind,
        "custom_details": {"team": alert.team, "since": _since(alert), **dict(alert.evidence)},
    }
    event["client"] = "accelboard"
    event["client_url"] = alert.url
    event["links"] = [
        {"href": alert.url, "text": "Open in accelboard"},
        {"href": alert.acknowledge_url, "text": "Acknowledge in accelboard"},
    ]
    if alert.chart_url:
        event["images"] = [{"src": alert.chart_url, "alt": alert.headline[:200]}]
    return event


def webhook_payload(message: RouteMessage) -> dict[str, Any]:
    """The generic webhook's JSON (schema version 1, docs/alerts-routes.md)."""
    kind = {"trigger": "alerts.opened", "resolve": "alerts.closed"}.get(message.event, "route.test")
    return {
        "version": WEBHOOK_VERSION,
        "type": kind,
        "delivery_id": message.delivery_id,
        "sent_at": message.sent_at.isoformat(),
        "summary": message.summary,
        "alerts": [
            {
                "id": a.id,
                "kind": a.kind,
                "kind_label": a.kind_label,
                "severity": a.severity,
                "state": a.state,
                "team": a.team,
                "headline": a.headline,
                "where": a.where,
                "opened_at": a.opened_at.isoformat(),
                "commit": a.commit,
                "url": a.url,
                "acknowledge_url": a.acknowledge_url,
                "dismiss_url": a.dismiss_url,
                "chart_url": a.chart_url,
                "evidence": [{"label": label, "text": text} for label, text in a.evidence],
            }
            for a in message.alerts
        ],
    }


def body_bytes(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed): compact JSON, UTF-8."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


# --- signing ----------------------------------------------------------------------------------


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    """``t=<unix time>,v1=<hex HMAC-SHA256 of "<unix time>.<body>">``."""
    signed = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


class SignatureError(ValueError):
    """A webhook signature that does not verify (what a receiver answers 401 to)."""


def signature_verify(
    *, secret: str, body: bytes, header: str, now: float, window_s: int = REPLAY_WINDOW_S
) -> int:
    """Check ``header`` as a receiver does; returns its timestamp. Raises ``SignatureError`` for a
    malformed header, a timestamp outside the replay window, or a wrong signature."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        raise SignatureError("no t=<unix time> in the signature header") from None
    if abs(now - timestamp) > window_s:
        raise SignatureError(f"timestamp {timestamp} is outside the {window_s} s replay window")
    expected = signature_header(secret=secret, body=body, timestamp=timestamp).split("v1=", 1)[1]
    if not any(hmac.compare_digest(expected, candidate) for candidate in parts.get("v1", [])):
        raise SignatureError("signature does not match")
    return timestamp


# --- checking targets -------------------------------------------------------------------------


class TargetError(ValueError):
    """A route target that cannot be used; ``field`` names the form field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def url_check(url: str, *, field: str = "url", https_only: bool = False) -> str:
    """A well-formed http(s) URL with a host, or ``TargetError`` naming ``field``."""
    url = (url or "").strip()
    if not url:
        raise TargetError(field, "Enter the webhook URL.")
    if any(c.isspace() for c in url) or len(url) > 2000:
        raise TargetError(field, "This is not a URL (spaces, or longer than 2,000 characters).")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise TargetError(field, f"{url[:80]!r} is not a well-formed URL.") from None
    schemes = ("https",) if https_only else ("http", "https")
    if parts.scheme not in schemes:
        raise TargetError(field, f"The URL must start with {' or '.join(s + '://' for s in schemes)}.")
    if not parts.hostname:
        raise TargetError(field, "The URL has no host name.")
    if parts.username or parts.password:
        raise TargetError(field, "The URL must not carry a user name or password.")
    if port == 0:
        raise TargetError(field, "The URL's port must be 1 to 65535.")
    return url


def slack_url_check(url: str, *, prefixes: Sequence[str] = (SLACK_WEBHOOK_PREFIX,)) -> str:
    """A Slack incoming-webhook URL (``https://hooks.slack.com/services/T…/B…/…``)."""
    url = url_check(url)
    for prefix in prefixes:
        if url.startswith(prefix) and len(url) > len(prefix):
            return url
    raise TargetError(
        "url",
        f"This is not a Slack incoming webhook: its URL starts with {prefixes[0]} "
        "(Slack: Apps > Incoming Webhooks > Add New Webhook to Workspace).",
    )


def pagerduty_key_check(key: str) -> str:
    key = (key or "").strip()
    if not PAGERDUTY_KEY.match(key):
        raise TargetError(
            "routing_key",
            f"A PagerDuty routing key is 32 letters and digits (this one has {len(key)} characters): "
            "the service's Integrations tab, Events API v2, Integration Key.",
        )
    return key


def address_is_public(address: str) -> bool:
    """Whether a request to ``address`` leaves this network: not loopback, link-local (cloud
    metadata lives there), private, shared (CGNAT), reserved, multicast or unspecified."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def mask_url(url: str) -> str:
    """What the routes page shows of a secret URL: its host and the path's first segment."""
    parts = urlsplit(url)
    first = parts.path.strip("/").split("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}/{first}/…" if first else f"{parts.scheme}://{parts.netloc}/"


def mask_key(key: str) -> str:
    return f"…{key[-4:]}" if len(key) > 4 else "…"
