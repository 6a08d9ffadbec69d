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
