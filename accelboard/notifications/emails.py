"""Alert emails: the message (subject, plain text and HTML), its links, and the SMTP connection.

Links are absolute (``SITE_URL``) because they are read in a mail client. The unsubscribe link
carries a signed token naming the user and the subscription, so it works without logging in;
the same URL is given in ``List-Unsubscribe`` with ``List-Unsubscribe-Post`` (RFC 8058) so that
mail clients can offer their own one-click button.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import django
from django.conf import settings
from django.core import mail, signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

from accelboard.alerts.choices import AlertKind, Severity
from accelboard.alerts.models import Alert

from .choices import DeliveryMode
from .models import series_label

UNSUBSCRIBE_SALT = "accelboard.notifications.unsubscribe"
SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARNING, Severity.INFO]


def absolute(path: str) -> str:
    return f"{settings.SITE_URL.rstrip('/')}{path}"


def alert_path(alert_id: int) -> str:
    """The alert's own page. The alerts pages are built separately; until ``alerts:detail``
    exists the list page is the target (the one place to change)."""
    try:
        return reverse("alerts:detail", args=[alert_id])
    except NoReverseMatch:
        return f"{reverse('alerts:list')}?alert={alert_id}"


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


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.4g}"


def _mean_spread(mean: float | None, spread: float | None, unit: str) -> str:
    if mean is None:
        return "–"
    text = _number(mean)
    if spread is not None:
        text += f" ± {_number(spread)}"
    return f"{text} {unit}".strip()


def _short(commit: str) -> str:
    return commit[:10]


def alert_row(alert: Alert) -> dict[str, Any]:
    """Everything an email says about one alert, as plain strings."""
    series = alert.series
    unit = series.unit if series else ""
    first = alert.first_run.git_commit if alert.first_run else ""
    good = alert.last_good_run.git_commit if alert.last_good_run else ""
    commits = f"{_short(good)}..{_short(first)}" if first and good else _short(first) or "–"
    return {
        "id": alert.pk,
        "title": alert.title,
        "severity": alert.severity,
        "severity_label": alert.get_severity_display(),
        "kind_label": alert.get_kind_display(),
        "team": alert.team.name,
        "metric": series.metric if series else "",
        "series": series_label(series) if series else "",
        "before": _mean_spread(alert.before_mean, alert.before_spread, unit),
        "after": _mean_spread(alert.after_mean, alert.after_spread, unit),
        "pct_change": "–" if alert.pct_change is None else f"{alert.pct_change:+.1f}%",
        "confidence": "–" if alert.confidence is None else f"{alert.confidence * 100:.0f}%",
        "commits": commits,
        "branch": alert.first_run.branch if alert.first_run else "",
        "url": absolute(alert_path(alert.pk)),
    }


def _worst(alerts: list[Alert]) -> str:
    present = {a.severity for a in alerts}
    return next((s.label for s in SEVERITY_ORDER if s in present), Severity.WARNING.label)


def _kind_plural(alerts: list[Alert]) -> str:
    kinds = Counter(a.kind for a in alerts)
    if len(kinds) == 1 and AlertKind.REGRESSION in kinds:
        return "regressions"
    if len(kinds) == 1 and AlertKind.IMPROVEMENT in kinds:
        return "improvements"
    return "alerts"


def subject_for(*, alerts: list[Alert], mode: str, day: str = "") -> str:
    """Severity, team, metric and % change for one alert; "N regressions in <commit>" for many."""
    if mode == DeliveryMode.DIGEST:
        teams = sorted({a.team.name for a in alerts})
        noun = "alert" if len(alerts) == 1 else "alerts"
        return f"[accelboard] Daily digest {day}: {len(alerts)} {noun} ({', '.join(teams)})"
    first = alerts[0]
    if len(alerts) == 1:
        if first.series is not None and first.pct_change is not None:
            # ASCII where we can: Django 5.2 folds an encoded Subject with a leading blank.
            workload = str(first.series.workload).replace(" · ", ", ")
            what = f"{first.series.metric} {first.pct_change:+.1f}% on {workload}"
        else:
            what = first.title
        return f"[{first.get_severity_display()}] {first.team.name}: {what}"
    commit = first.first_run.git_commit if first.first_run else ""
    where = f" in {_short(commit)}" if commit else ""
    return f"[{_worst(alerts)}] {first.team.name}: {len(alerts)} {_kind_plural(alerts)}{where}"


def message_build(
    *,
    to: str,
    alerts: list[Alert],
    mode: str,
    token: str,
    day: str = "",
) -> EmailMultiAlternatives:
    rows = [alert_row(a) for a in alerts]
    unsubscribe = absolute(unsubscribe_path(token))
    context = {
        "rows": rows,
        "mode": mode,
        "digest": mode == DeliveryMode.DIGEST,
        "day": day,
        "count": len(rows),
        "commits": rows[0]["commits"] if rows else "",
        "unsubscribe_url": unsubscribe,
        "subscriptions_url": absolute(reverse("notifications:subscriptions")),
        "site_url": settings.SITE_URL,
    }
    subject = subject_for(alerts=alerts, mode=mode, day=day)
    message = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string("email/alerts.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        headers={
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
    )
    message.attach_alternative(render_to_string("email/alerts.html", context), "text/html")
    return message


def mail_connection() -> Any:
    """The configured backend: ``mailers.default`` on Django >= 6.1 (``MAILERS``), else
    ``get_connection()`` (``EMAIL_*``); one place so that neither raises a deprecation warning."""
    if django.VERSION >= (6, 1):
        return mail.mailers.default  # type: ignore[attr-defined]
    return mail.get_connection()
