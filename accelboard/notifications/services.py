"""Writes of the notifications app: subscriptions, and planning and sending alert emails.

Sending is in two steps so that it is safe to run twice and under two workers:

1. **Plan** (``deliveries_plan``): under a PostgreSQL advisory lock, the alerts not yet delivered
   to each subscriber are grouped (``grouping.deliveries_plan``) and written as ``Delivery`` rows
   with their ``DeliveryItem``s in one transaction. A second planner waits for the lock and then
   finds everything planned; the unique (user, alert) constraint backs this up.
2. **Send** (``delivery_send``): a delivery is claimed with a conditional ``UPDATE`` (pending or
   failed-and-due → sending); only the worker whose update changed the row sends. Alerts
   acknowledged, dismissed or resolved since planning are left out; when none is left the
   delivery is ``skipped``. An SMTP error is recorded (status failed, attempts, last error, next
   attempt) and re-raised so that the task's declared retry runs; the beat pass retries what is due.

Triage from an email (``triage_link_read``, ``triage_link_use``): a signed link names the user,
the alert and the action; using it records the alerts app's own transition as that user and a
``TriageLinkUse`` row in one transaction, so a link acts once, and a refused transition (the
alert was acknowledged meanwhile) leaves the link unused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from accelboard.alerts.choices import AlertState, DismissReason
from accelboard.alerts.models import Alert, AlertMetric
from accelboard.alerts.services import AlertTransitionError, alert_acknowledge, alert_dismiss
from accelboard.benchmarks.models import Series
from accelboard.core.access import Action, can, scope_for_user
from accelboard.core.models import Team
from accelboard.core.selectors import team_leads_mailable

from . import emails, links, selectors
from .choices import DeliveryMode, DeliveryStatus, TriageAction
from .grouping import AlertRef, SubscriptionRef
from .grouping import deliveries_plan as plan_groups
from .models import Delivery, DeliveryItem, OutboxMessage, Subscription, TriageLinkUse

log = logging.getLogger(__name__)

# Six attempts over about an hour (1, 2, 4, 8, 16 minutes apart), then the delivery stays failed.
MAX_ATTEMPTS = 6
BACKOFF_FIRST_S = 60
BACKOFF_MAX_S = 3600
# A delivery left "sending" this long was lost with its worker; it may be claimed again.
SENDING_STALE = timedelta(minutes=15)
# A "pending" delivery this old lost its enqueued task; the retry pass sends it.
PENDING_STALE = timedelta(minutes=5)
# Alerts older than this are never mailed, whatever happened to the mail system meanwhile.
ALERT_MAX_AGE = timedelta(days=7)
# A commit's alerts are mailed once its newest alert is this old: a detector opening fifty alerts
# one transaction at a time must not have the first few mailed alone.
SETTLE = timedelta(seconds=20)
_PLAN_LOCK = 0x6E6F7469  # "noti": one advisory lock for every planner


# --- subscriptions ----------------------------------------------------------------------------


def _require_member(*, user: Any, team: Team) -> None:
    if not can(user, Action.SUBSCRIBE, team):
        raise ValidationError(
            {"team": "You can only subscribe to alerts of teams you belong to (staff: any team)."}
        )


def subscription_create(
    *, user: Any, team: Team, series: Series | None = None, kind: str = "", mode: str
) -> Subscription:
    """Follow a team's alerts, one series of it, or one kind of alert in it."""
    _require_member(user=user, team=team)
    if series is not None and kind:
        raise ValidationError({"kind": "Choose a series or an alert kind, not both."})
    if series is not None and series.team_id != team.pk:
        raise ValidationError({"series": "This series belongs to another team."})
    if mode not in DeliveryMode.values:
        raise ValidationError({"mode": f"Unknown delivery mode {mode!r}."})
    try:
        with transaction.atomic():
            return Subscription.objects.create(user=user, team=team, series=series, kind=kind, mode=mode)
    except IntegrityError:
        raise ValidationError({"__all__": "You already have this subscription."}) from None


def subscriptions_for_my_teams(*, user: Any, mode: str = DeliveryMode.IMMEDIATE) -> int:
    """One click: follow all alerts of every team the user belongs to. Returns how many were new."""
    scope = scope_for_user(user)
    rows = [
        Subscription(user=user, team_id=t, mode=mode) for t in scope.teams if scope.can(Action.SUBSCRIBE, t)
    ]
    before = Subscription.objects.filter(user=user).count()
    Subscription.objects.bulk_create(rows, ignore_conflicts=True)
    return Subscription.objects.filter(user=user).count() - before


def subscription_mode_set(*, subscription: Subscription, mode: str) -> Subscription:
    if mode not in DeliveryMode.values:
        raise ValidationError({"mode": f"Unknown delivery mode {mode!r}."})
    Subscription.objects.filter(pk=subscription.pk).update(mode=mode)
    subscription.mode = mode
    return subscription


def subscription_delete(*, subscription: Subscription) -> None:
    subscription.delete()


def subscription_unsubscribe(*, token: str) -> tuple[Any, int]:
    """Follow an unsubscribe link: (user, number of subscriptions removed). Removing what is
    already gone is not an error (mail clients may post the link twice).

    Raises ``signing.BadSignature`` for a token we did not sign."""
    payload = links.unsubscribe_token_read(token)
    user = get_user_model().objects.filter(pk=payload["u"]).first()
    if user is None:
        return None, 0
    subs = Subscription.objects.filter(user=user)
    subs = subs.filter(pk=payload["s"]) if "s" in payload else subs.filter(mode=DeliveryMode.DIGEST)
    removed, _ = subs.delete()
    return user, removed


# --- planning ---------------------------------------------------------------------------------


def deliveries_plan(*, mode: str, now: datetime | None = None, settle: timedelta = SETTLE) -> list[int]:
    """Write the deliveries due in ``mode`` and return their ids (to be sent).

    Immediate emails wait until a commit's alerts have settled (``settle``); digests do not."""
    now = now or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PLAN_LOCK])
        subs = list(
            # Still a member (core.access: e-mail follows membership, staff included).
            Subscription.objects.filter(team__memberships__user=F("user"))
            .exclude(user__email="")
            .filter(user__is_active=True)
        )
        if not subs or not any(s.mode == mode for s in subs):
            return []
        since = max(min(s.created_at for s in subs), now - ALERT_MAX_AGE)
        alerts = list(
            Alert.objects.filter(
                state=AlertState.OPEN, team_id__in={s.team_id for s in subs}, opened_at__gte=since
            )
            .select_related("first_run")
            .only("id", "team_id", "series_id", "kind", "opened_at", "first_run__git_commit")
        )
        if not alerts:
            return []
        delivered = set(
            DeliveryItem.objects.filter(alert_id__in=[a.pk for a in alerts]).values_list(
                "user_id", "alert_id"
            )
        )
        held: dict[int, set[int]] = {}
        for alert_id, series_id in AlertMetric.objects.filter(
            alert_id__in=[a.pk for a in alerts]
        ).values_list("alert_id", "series_id"):
            held.setdefault(alert_id, set()).add(series_id)
        day = timezone.localdate(now).isoformat()
        groups = plan_groups(
            subscriptions=[
                SubscriptionRef(s.pk, s.user_id, s.team_id, s.series_id, s.kind, s.mode, s.created_at)
                for s in subs
            ],
            alerts=[
                AlertRef(
                    a.pk,
                    a.team_id,
                    a.series_id,
                    a.kind,
                    a.opened_at,
                    a.first_run.git_commit if a.first_run else "",
                    frozenset(held.get(a.pk, set()) - {a.series_id}),
                )
                for a in alerts
            ],
            delivered=delivered,
            mode=mode,
            digest_key=f"digest:{day}",
            hold_after=now - settle if mode == DeliveryMode.IMMEDIATE else None,
        )
        ids: list[int] = []
        for group in groups:
            delivery = Delivery.objects.create(
                user_id=group.user_id,
                subscription_id=group.subscription_id,
                mode=mode,
                group_key=group.key[:120],
            )
            DeliveryItem.objects.bulk_create(
                [DeliveryItem(delivery=delivery, alert_id=a, user_id=group.user_id) for a in group.alert_ids]
            )
            ids.append(delivery.pk)
    return ids


def alerts_settling(*, now: datetime | None = None, settle: timedelta = SETTLE) -> bool:
    """Whether open alerts are too fresh to mail yet: the dispatcher looks again after ``settle``."""
    now = now or timezone.now()
    return Alert.objects.filter(state=AlertState.OPEN, opened_at__gt=now - settle).exists()


# --- sending ----------------------------------------------------------------------------------


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(BACKOFF_FIRST_S * 2 ** max(attempts - 1, 0), BACKOFF_MAX_S))


def _claim(*, delivery_id: int, now: datetime) -> bool:
    claimable = (
        Q(status=DeliveryStatus.PENDING)
        | Q(status=DeliveryStatus.FAILED, attempts__lt=MAX_ATTEMPTS)
        | Q(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE)
    )
    changed = (
        Delivery.objects.filter(claimable, pk=delivery_id)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(status=DeliveryStatus.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    )
    return changed == 1


def delivery_send(*, delivery_id: int, now: datetime | None = None, force: bool = False) -> str:
    """Send one planned email; returns the delivery's status afterwards.

    ``force`` ignores the backoff time (a retry that Celery itself scheduled is already due).
    Raises the ``OSError`` (``smtplib.SMTPException`` is one) of a failed send after recording it.
    """
    now = now or timezone.now()
    if force:
        Delivery.objects.filter(pk=delivery_id, status=DeliveryStatus.FAILED).update(next_attempt_at=None)
    if not _claim(delivery_id=delivery_id, now=now):
        status = Delivery.objects.filter(pk=delivery_id).values_list("status", flat=True).first()
        return status or "missing"
    delivery = Delivery.objects.select_related("user", "subscription").get(pk=delivery_id)
    alerts = selectors.alerts_for_email(alert_ids=list(delivery.items.values_list("alert_id", flat=True)))
    reason = ""
    if not alerts:
        reason = "every alert was acknowledged, dismissed or resolved before sending"
    elif delivery.mode == DeliveryMode.IMMEDIATE and delivery.subscription is None:
        reason = "the subscription was removed before sending"
    elif not delivery.user.email:
        reason = "the user has no email address"
    if reason:
        Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.SKIPPED, last_error=reason)
        return DeliveryStatus.SKIPPED
    token = links.unsubscribe_token(user_id=delivery.user_id, subscription_id=delivery.subscription_id)
    message = emails.message_build(
        to=delivery.user.email,
        user_id=delivery.user_id,
        alerts=alerts,
        mode=delivery.mode,
        token=token,
        day=delivery.group_key.removeprefix("digest:") if delivery.mode == DeliveryMode.DIGEST else "",
        delivery_id=delivery.pk,
    )
    try:
        emails.mail_connection().send_messages([message])
    except OSError as exc:
        attempts = delivery.attempts
        gave_up = attempts >= MAX_ATTEMPTS
        Delivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.FAILED,
            last_error=f"{type(exc).__name__}: {exc}"[:2000],
            next_attempt_at=None if gave_up else now + _backoff(attempts),
            subject=message.subject[:300],
        )
        log.warning("delivery %s attempt %s failed: %s", delivery.pk, attempts, exc)
        raise
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.SENT, sent_at=timezone.now(), subject=message.subject[:300], last_error=""
    )
    return DeliveryStatus.SENT


def deliveries_due(*, now: datetime | None = None) -> list[int]:
    """Deliveries a retry pass should send: failed and due, pending too long, lost mid-send."""
    now = now or timezone.now()
    return list(
        Delivery.objects.filter(
            Q(status=DeliveryStatus.FAILED, attempts__lt=MAX_ATTEMPTS, next_attempt_at__lte=now)
            | Q(status=DeliveryStatus.PENDING, created_at__lt=now - PENDING_STALE)
            | Q(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE)
        )
        .order_by("created_at")
        .values_list("pk", flat=True)
    )


# --- triage from an email's link --------------------------------------------------------------


class TriageLinkError(Exception):
    """A triage link that cannot act; ``status`` is the HTTP status its page answers with."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TriagePrompt:
    """What the confirmation page shows for a valid link."""

    claim: links.TriageClaim
    user: Any
    alert: Alert
    used: TriageLinkUse | None
    allowed: bool


_TRIAGE_NOT_FOUND = "The alert or the account this link was sent to no longer exists."


def triage_link_read(*, token: str, viewer: Any = None) -> TriagePrompt:
    """Check a triage link without acting. Raises ``TriageLinkError``: 400 for a token we did not
    sign (cut or changed), 410 for an expired one, 404 when its user or alert no longer exists.

    An alert the link's user may no longer see (they left its team), or that ``viewer`` (the
    signed-in user opening the link, None when nobody is) may not see, is the same 404 with the
    same words as one that does not exist: the page reveals nothing of it, not even that it is."""
    try:
        claim = links.triage_token_read(token)
    except links.TriageLinkExpired:
        raise TriageLinkError(
            f"This link has expired: email links work for {links.TRIAGE_MAX_AGE.days} days. "
            "Open the alert in accelboard to triage it.",
            status=410,
        ) from None
    except signing.BadSignature:
        raise TriageLinkError(
            "This link is not valid. It may have been cut by your mail client: open the whole link "
            "from the email again.",
            status=400,
        ) from None
    user = get_user_model().objects.filter(pk=claim.user_id).first()
    alert = selectors.alert_for_triage(alert_id=claim.alert_id)
    if user is None or alert is None or not can(user, Action.VIEW, alert.team_id):
        raise TriageLinkError(_TRIAGE_NOT_FOUND, status=404)
    if viewer is not None and viewer.pk != user.pk and not can(viewer, Action.VIEW, alert.team_id):
        raise TriageLinkError(_TRIAGE_NOT_FOUND, status=404)
    used = TriageLinkUse.objects.filter(digest=claim.digest).select_related("user").first()
    return TriagePrompt(
        claim=claim, user=user, alert=alert, used=used, allowed=can(user, Action.TRIAGE, alert.team_id)
    )


def triage_link_use(*, token: str, reason: str = "", note: str = "", viewer: Any = None) -> Alert:
    """Act on a triage link as its user, once: acknowledge, or dismiss with ``reason``.

    Raises ``TriageLinkError``: those of ``triage_link_read`` (``viewer`` as there), 410 for a
    link already used, 403 when the user may still see but no longer triage the team's alerts,
    400 for an unknown dismiss reason, 409 when the alert's state does not allow it (the link
    stays unused)."""
    prompt = triage_link_read(token=token, viewer=viewer)
    claim, alert, user = prompt.claim, prompt.alert, prompt.user
    if prompt.used is not None:
        raise TriageLinkError(
            f"This link was already used on {prompt.used.used_at:%Y-%m-%d %H:%M} UTC.", status=410
        )
    if not prompt.allowed:
        raise TriageLinkError(
            f"{user.get_username()} can no longer triage {alert.team.name}'s alerts "
            "(only its leads and engineers can).",
            status=403,
        )
    if claim.action == TriageAction.DISMISS and reason not in DismissReason.values:
        raise TriageLinkError(
            f"reason: choose one of {', '.join(DismissReason.values)} to dismiss an alert.", status=400
        )
    delivery_id = claim.delivery_id
    if delivery_id is not None and not Delivery.objects.filter(pk=delivery_id).exists():
        delivery_id = None
    try:
        with transaction.atomic():
            TriageLinkUse.objects.create(
                digest=claim.digest,
                user=user,
                alert=alert,
                action=claim.action,
                delivery_id=delivery_id,
                used_at=timezone.now(),
            )
            if claim.action == TriageAction.ACKNOWLEDGE:
                return alert_acknowledge(alert=alert, user=user)
            return alert_dismiss(alert=alert, user=user, reason=reason, note=note)
    except IntegrityError:
        # A second click that raced the first: the first one acted.
        raise TriageLinkError("This link was already used.", status=410) from None
    except AlertTransitionError as exc:
        raise TriageLinkError(str(exc), status=409) from None


# --- operators and the demo -------------------------------------------------------------------


def email_test_send(*, to: str, requested_by: str = "") -> str:
    """Send the test email to ``to`` now, through the configured backend (not a worker: the point
    is to see the SMTP server's answer). Returns a sentence saying where it went.

    Raises ``ValidationError`` naming ``to`` for a malformed address, and the backend's
    ``OSError`` (``smtplib.SMTPException`` is one) when the server refuses or cannot be reached."""
    to = (to or "").strip()
    try:
        validate_email(to)
    except ValidationError:
        raise ValidationError({"to": f"{to!r} is not an email address."}) from None
    message = emails.check_email_build(to=to, requested_by=requested_by)
    emails.mail_connection().send_messages([message])
    backend, host = emails.mail_settings_summary()
    where = f"the SMTP server {host}" if host else backend.rsplit(".", 1)[-1]
    return f"Test email sent to {to} through {where}."


def subscriptions_for_team_leads(
    *, team_slugs: list[str] | None = None, mode: str = DeliveryMode.IMMEDIATE
) -> int:
    """Subscribe every team lead to all alerts of the teams they lead (the demo's inboxes);
    returns how many subscriptions were new. Alerts opened before now are not mailed."""
    rows = [
        Subscription(user_id=u, team_id=t, mode=mode) for u, t in team_leads_mailable(team_slugs=team_slugs)
    ]
    before = Subscription.objects.count()
    Subscription.objects.bulk_create(rows, ignore_conflicts=True)
    return Subscription.objects.count() - before


def outbox_clear() -> int:
    """Delete every stored email (the outbox page's button); returns how many."""
    deleted, _ = OutboxMessage.objects.all().delete()
    return deleted


def outbox_messages_store(*, messages: list[dict[str, Any]]) -> int:
    """Keep emails in the outbox (``OutboxMessage``: subject, from_email, recipients, raw) instead
    of sending them: all of one call or none, like one SMTP session that fails before QUIT."""
    with transaction.atomic():
        OutboxMessage.objects.bulk_create([OutboxMessage(**message) for message in messages])
    return len(messages)
