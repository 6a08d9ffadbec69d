"""Who wants which alerts by email, and every email planned or sent (never lost, never twice).

``Subscription``: a user follows a whole team, one series, or one alert kind of a team, either
immediately or as a daily digest. ``Delivery``: one email to one user; ``DeliveryItem`` ties it
to the alerts it carries, with a unique (user, alert) pair so that an alert reaches a user once
at most, whichever worker or mode gets there first. ``TriageLinkUse``: an email's signed
acknowledge or dismiss link that has acted (a link acts once). ``OutboxMessage``: an email kept
in the database instead of sent (the demo's and a trial install's mail backend), read by staff
in the browser.

``AlertRoute``: a team's (or one person's) alerts sent to Slack, Teams, PagerDuty or a signed
webhook, filtered by kind family and minimum severity; its URL or key is stored encrypted
(``route_secrets``). ``RouteDelivery``: one message to one route with the channel's answer;
``RouteDeliveryItem`` ties it to its alerts, unique per (route, alert, event) so that an alert
reaches a route once when it opens and once when it closes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from accelboard.alerts.choices import AlertKind, Severity

from .choices import DeliveryMode, DeliveryStatus, RouteChannel, RouteEvent, RouteKind, TriageAction


def series_label(series: Any) -> str:
    """metric · workload · hardware, leaving out hardware the series does not name."""
    label = f"{series.metric} · {series.workload}"
    if series.accelerator_type_id:
        label += f" · {series.accelerator_count}× {series.accelerator_type}"
    return label


class Subscription(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_subscriptions"
    )
    # Always set: the team whose alerts these are (a series' team for a series subscription).
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    series = models.ForeignKey(
        "benchmarks.Series", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=AlertKind.choices, blank=True)
    mode = models.CharField(max_length=16, choices=DeliveryMode.choices, default=DeliveryMode.IMMEDIATE)
    # Alerts opened before the subscription existed are not mailed: subscribing is not a backlog.
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team_id", "series_id", "kind"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "team", "series", "kind"],
                name="subscription_unique",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(series__isnull=True) | Q(kind=""), name="subscription_series_or_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.scope_label()}"

    @property
    def specificity(self) -> int:
        """Series beats kind beats team when several subscriptions match one alert."""
        return 2 if self.series_id else (1 if self.kind else 0)

    @property
    def series_label(self) -> str:
        return series_label(self.series) if self.series is not None else ""

    def scope_label(self) -> str:
        if self.series_id:
            return f"{self.team.name}: series {self.series_label}"
        if self.kind:
            return f"{self.team.name}: {AlertKind(self.kind).label.lower()} alerts"
        return f"{self.team.name}: all alerts"


class Delivery(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The subscription an immediate email answers to (its unsubscribe link); null for digests.
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    mode = models.CharField(max_length=16, choices=DeliveryMode.choices)
    # What grouped the alerts: "commit:<sha>", "alert:<id>" or "digest:<date>".
    group_key = models.CharField(max_length=120)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    subject = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_status_next")]

    def __str__(self) -> str:
        return f"{self.mode} {self.group_key} → {self.user} ({self.status})"


class DeliveryItem(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="items")
    alert = models.ForeignKey("alerts.Alert", on_delete=models.CASCADE, related_name="+")
    # Denormalised from the delivery so that the database itself refuses a second email.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "alert"], name="delivery_item_once")]

    def __str__(self) -> str:
        return f"alert {self.alert_id} → user {self.user_id}"


class TriageLinkUse(models.Model):
    """A signed triage link that has acted; the unique digest refuses the same link a second time."""

    # sha256 of the whole token: the token itself is a credential and is not stored.
    digest = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    alert = models.ForeignKey("alerts.Alert", on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=16, choices=TriageAction.choices)
    delivery = models.ForeignKey(Delivery, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    used_at = models.DateTimeField()

    class Meta:
        ordering = ["-used_at"]

    def __str__(self) -> str:
        return f"{self.action} alert {self.alert_id} by user {self.user_id}"


class OutboxMessage(models.Model):
    """One email as the mail client would receive it (``raw``), with its envelope for the list."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    subject = models.CharField(max_length=998, blank=True)
    from_email = models.CharField(max_length=320, blank=True)
    # Envelope recipients (to, cc and bcc), as the SMTP server would have been given them.
    recipients = models.JSONField(default=list)
    raw = models.BinaryField()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.subject} → {', '.join(self.recipients)}"


class AlertRoute(models.Model):
    # Whose alerts these are; a team route is managed by the team's leads (Action.MANAGE).
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="alert_routes")
    # Set for a personal route: only this member sees and manages it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="alert_routes"
    )
    name = models.CharField(max_length=80)
    channel = models.CharField(max_length=16, choices=RouteChannel.choices)
    kind = models.CharField(max_length=16, choices=RouteKind.choices, blank=True)
    min_severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    # Fernet token of the route's JSON secrets (URL, routing key, signing secret): never plain.
    secret = models.TextField()
    # What the page shows of the target (host and a masked tail), stored apart from the secret.
    target_hint = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Alerts opened before the route existed are not sent: adding a route is not a backlog.
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team_id", "name", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.channel})"


class RouteDelivery(models.Model):
    route = models.ForeignKey(AlertRoute, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=8, choices=RouteEvent.choices)
    # What grouped the alerts: "commit:<sha>", "alert:<id>" or "test".
    group_key = models.CharField(max_length=120)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # The channel's last answer: HTTP status and body (cut to RESPONSE_BODY_MAX characters).
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)
    summary = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "route deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="route_delivery_status_next")]

    def __str__(self) -> str:
        return f"{self.event} {self.group_key} → route {self.route_id} ({self.status})"


class RouteDeliveryItem(models.Model):
    delivery = models.ForeignKey(RouteDelivery, on_delete=models.CASCADE, related_name="items")
    alert = models.ForeignKey("alerts.Alert", on_delete=models.CASCADE, related_name="+")
    # Denormalised so that the database itself refuses a second message for one alert and event.
    route = models.ForeignKey(AlertRoute, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=8, choices=RouteEvent.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "alert", "event"], name="route_delivery_item_once")
        ]

    def __str__(self) -> str:
        return f"alert {self.alert_id} → route {self.route_id} ({self.event})"
