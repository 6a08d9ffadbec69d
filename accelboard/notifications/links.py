"""The links an alert email carries: absolute URLs and the signed tokens that act without a login.

Links are absolute (``SITE_URL``) because they are read in a mail client.

1. **Unsubscribe**: a token naming the user and the subscription (or, without one, all of the
   user's daily digests). It does not expire: an old email must still let its reader stop them.
2. **Triage** (acknowledge, dismiss): a token naming the user, the alert and the action, signed
   with a timestamp and refused after ``TRIAGE_MAX_AGE``. Following it shows a confirmation page;
   only the page's button (a POST) acts, so a link scanner that fetches every URL changes
   nothing. A token acts once: its digest is recorded with the triage it made
   (``TriageLinkUse``), and the same token is refused afterwards.

Both are Django signatures (HMAC of ``SECRET_KEY`` with a salt per purpose), so a changed
character, or a token of one kind used as the other, is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.urls import NoReverseMatch, reverse

from .choices import DeliveryMode, TriageAction

UNSUBSCRIBE_SALT = "accelboard.notifications.unsubscribe"
TRIAGE_SALT = "accelboard.notifications.triage"
# Alerts older than a week are not mailed any more; their links last as long.
TRIAGE_MAX_AGE = timedelta(days=7)


def absolute(path: str) -> str:
    return f"{settings.SITE_URL.rstrip('/')}{path}"


def alert_path(alert_id: int) -> str:
    """The alert's own page (the list filtered to it where no detail page exists)."""
    try:
        return reverse("alerts:detail", args=[alert_id])
    except NoReverseMatch:
        return f"{reverse('alerts:list')}?alert={alert_id}"


def run_path(run_id: int) -> str:
    return reverse("benchmarks:run_detail", args=[run_id])


def compare_path(*, before_run_id: int, after_run_id: int) -> str:
    return f"{reverse('benchmarks:compare')}?a={before_run_id}&b={after_run_id}"


# --- unsubscribe ------------------------------------------------------------------------------


def unsubscribe_token(*, user_id: int, subscription_id: int | None = None) -> str:
    """A token for one subscription, or (no id) for all of the user's daily digests."""
    payload: dict[str, Any] = {"u": user_id}
    if subscription_id is not None:
        payload["s"] = subscription_id
    else:
        payload["m"] = DeliveryMode.DIGEST.value
    return signing.dumps(payload, salt=UNSUBSCRIBE_SALT, compress=True)


def unsubscribe_token_read(token: str) -> dict[str, Any]:
    """The token's payload; raises ``signing.BadSignature`` for anything not signed by us."""
    payload = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    if not isinstance(payload, dict) or not isinstance(payload.get("u"), int):
        raise signing.BadSignature("unsubscribe token without a user")
    return payload


def unsubscribe_path(token: str) -> str:
    return reverse("notifications:unsubscribe", args=[token])


# --- triage -----------------------------------------------------------------------------------


class TriageLinkExpired(Exception):
    """The token was ours but is older than ``TRIAGE_MAX_AGE``."""


@dataclass(frozen=True)
class TriageClaim:
    """What a valid triage token says: who acts, on which alert, how."""

    user_id: int
    alert_id: int
    action: str
    delivery_id: int | None
    digest: str


def triage_token(*, user_id: int, alert_id: int, action: str, delivery_id: int | None = None) -> str:
    if action not in TriageAction.values:
        raise ValueError(f"unknown triage action {action!r}")
    payload: dict[str, Any] = {"u": user_id, "a": alert_id, "x": action}
    if delivery_id is not None:
        payload["d"] = delivery_id
    return signing.dumps(payload, salt=TRIAGE_SALT, compress=True)


def triage_token_read(token: str) -> TriageClaim:
    """The token's claim. Raises ``TriageLinkExpired`` for one of ours that is too old and
    ``signing.BadSignature`` for anything else we did not sign (a tampered or cut token)."""
    try:
        payload = signing.loads(token, salt=TRIAGE_SALT, max_age=TRIAGE_MAX_AGE)
    except signing.SignatureExpired as exc:
        raise TriageLinkExpired(str(exc)) from exc
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("u"), int)
        or not isinstance(payload.get("a"), int)
        or payload.get("x") not in TriageAction.values
    ):
        raise signing.BadSignature("triage token without a user, an alert or a known action")
    delivery = payload.get("d")
    return TriageClaim(
        user_id=payload["u"],
        alert_id=payload["a"],
        action=payload["x"],
        delivery_id=delivery if isinstance(delivery, int) else None,
        digest=hashlib.sha256(token.encode()).hexdigest(),
    )


def triage_path(token: str) -> str:
    return reverse("notifications:triage", args=[token])


# --- charts in channel messages ---------------------------------------------------------------

CHART_SALT = "accelboard.notifications.chart"
# Slack and Teams fetch a message's image when it is shown, days later too.
CHART_MAX_AGE = timedelta(days=30)


def chart_token(alert_id: int) -> str:
    """A signed link to one alert's chart PNG: chat services fetch it without a login."""
    return signing.dumps({"a": alert_id}, salt=CHART_SALT, compress=True)


def chart_token_read(token: str) -> int:
    """The alert id of a chart token; raises ``signing.BadSignature`` (expired included)."""
    payload = signing.loads(token, salt=CHART_SALT, max_age=CHART_MAX_AGE)
    return int(payload["a"])


def chart_path(alert_id: int) -> str:
    return reverse("notifications:route_chart", args=[chart_token(alert_id)])


def routes_path() -> str:
    return reverse("notifications:routes")
