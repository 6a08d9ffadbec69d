"""Choices of the notifications app: how a subscriber wants alerts, and where a delivery stands."""

from __future__ import annotations

from django.db import models


class DeliveryMode(models.TextChoices):
    # One email per change as soon as it is detected; all alerts of one commit share one email.
    IMMEDIATE = "immediate", "Immediately (one email per commit)"
    # One email a day listing the day's alerts.
    DIGEST = "digest", "Daily digest"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    # The SMTP server refused or could not be reached; retried until the attempts run out.
    FAILED = "failed", "Failed"
    # Every alert of the email was acknowledged, dismissed or resolved before it went out.
    SKIPPED = "skipped", "Skipped"


class TriageAction(models.TextChoices):
    """What an email's signed link may do to an alert (after a confirmation click)."""

    ACKNOWLEDGE = "acknowledge", "Acknowledge"
    DISMISS = "dismiss", "Dismiss"


class RouteChannel(models.TextChoices):
    SLACK = "slack", "Slack"
    TEAMS = "teams", "Microsoft Teams"
    PAGERDUTY = "pagerduty", "PagerDuty"
    WEBHOOK = "webhook", "Webhook (signed JSON)"


class RouteKind(models.TextChoices):
    """Which alerts a route carries (``route_payloads.kind_family``); blank: every kind."""

    ALL = "", "All alerts"
    REGRESSION = "regression", "Benchmark regressions and improvements"
    DRIFT = "drift", "Quantization drift"
    PRODUCTION = "production", "Production signals (SLO, throughput, energy, memory, throttling, XID)"


class RouteEvent(models.TextChoices):
    TRIGGER = "trigger", "Alerts opened"
    RESOLVE = "resolve", "Alert closed"
    TEST = "test", "Test"
