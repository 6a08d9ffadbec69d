"""Alert emails: the message (subject, plain text, HTML with inline charts), and the connection.

1. ``message_build`` reads each alert's facts (``selectors.alert_facts``), words them
   (``content``), draws a chart for the worst few alerts that have a series (``charts``), and
   renders ``email/alerts.txt`` and ``email/alerts.html``. The charts are inline PNG parts of a
   multipart/related beside the HTML (``cid:`` links), so they show without loading anything;
   the plain-text part says in words what each chart shows.
2. Every alert carries signed acknowledge and dismiss links for the recipient (``links``); the
   email carries ``List-Unsubscribe`` with ``List-Unsubscribe-Post`` (RFC 8058) so that mail
   clients can offer their own one-click button.
3. ``check_email_build`` is the operator's "does mail work" email.
"""

from __future__ import annotations

import email.message
import logging
from collections.abc import Sequence
from email.mime.image import MIMEImage
from email.mime.multipart import MIMEMultipart
from typing import Any

import django
from django.conf import settings
from django.core import mail
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from accelboard.alerts.models import Alert

from . import charts, content, links, selectors
from .choices import DeliveryMode, TriageAction

log = logging.getLogger(__name__)

# Charts cost ~30 kB each: the worst few alerts of an email get one, the rest are words.
CHARTS_PER_EMAIL = 3


class AlertEmail(EmailMultiAlternatives):
    """An HTML email whose HTML part has inline images (``cid:<content id>``).

    Django builds text and HTML as a multipart/alternative; here the HTML part becomes a
    multipart/related holding the HTML and its images, the layout mail clients expect. Both
    Django's legacy (5.2) and modern (6.x) message objects are handled."""

    def __init__(self, *args: Any, inline_images: Sequence[tuple[str, bytes]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inline_images = list(inline_images)

    def message(self, **kwargs: Any) -> Any:
        msg = super().message(**kwargs)
        if not self.inline_images:
            return msg
        if isinstance(msg, email.message.MIMEPart):
            html = msg.get_body(preferencelist=("html",))
            assert html is not None, "inline images need an HTML alternative"
            for content_id, png in self.inline_images:
                html.add_related(
                    png,
                    maintype="image",
                    subtype="png",
                    cid=f"<{content_id}>",
                    disposition="inline",
                    filename=f"{content_id.split('@')[0]}.png",
                )
            return msg
        parts = msg.get_payload()
        for index, part in enumerate(parts):
            if part.get_content_type() == "text/html":
                related = MIMEMultipart("related")
                related.attach(part)
                for content_id, png in self.inline_images:
                    image = MIMEImage(png, "png")
                    image.add_header("Content-ID", f"<{content_id}>")
                    image.add_header(
                        "Content-Disposition", "inline", filename=f"{content_id.split('@')[0]}.png"
                    )
                    related.attach(image)
                parts[index] = related
                break
        return msg


def _chart(alert: Alert, facts: content.AlertFacts) -> tuple[bytes, str] | None:
    """(PNG, text alternative) of the alert's series around its change, or None."""
    if alert.series_id is None or facts.first_run is None or facts.kind not in content.SERIES_KINDS:
        return None
    times, values, (before, after) = selectors.alert_chart_series(alert=alert)
    if len(values) < 2:
        return None
    png = charts.series_chart_png(
        times=times,
        values=values,
        unit=facts.unit,
        change_at=facts.first_run.started_at,
        before=(before.start, before.end, before.level) if before else None,
        after=(after.start, after.end, after.level) if after else None,
    )
    return png, content.chart_alt(facts, len(values))


def alert_chart_png(alert: Alert) -> bytes | None:
    """The chart of one alert as a PNG (the route messages' image link), or None."""
    drawn = _chart(alert, selectors.alert_facts(alert=alert))
    return drawn[0] if drawn is not None else None


def _item(
    facts: content.AlertFacts, *, user_id: int, delivery_id: int | None, chart: tuple[str, str] | None
) -> dict[str, Any]:
    def triage(action: str) -> str:
        token = links.triage_token(user_id=user_id, alert_id=facts.id, action=action, delivery_id=delivery_id)
        return links.absolute(links.triage_path(token))

    return {
        "facts": facts,
        "what": content.what_moved(facts),
        "rows": content.alert_rows(facts),
        "setup": content.setup_line(facts),
        "chart_cid": chart[0] if chart else "",
        "chart_alt": chart[1] if chart else "",
        "acknowledge_url": triage(TriageAction.ACKNOWLEDGE),
        "dismiss_url": triage(TriageAction.DISMISS),
    }


def message_build(
    *,
    to: str,
    user_id: int,
    alerts: list[Alert],
    mode: str,
    token: str,
    day: str = "",
    delivery_id: int | None = None,
) -> AlertEmail:
    """The email of one delivery: ``alerts`` (loaded by ``selectors.alerts_for_email``) for
    ``to``; ``token`` is its unsubscribe token."""
    digest = mode == DeliveryMode.DIGEST
    facts_by_id = {a.pk: selectors.alert_facts(alert=a) for a in alerts}
    ordered = content.worst_first(list(facts_by_id.values()))
    by_id = {a.pk: a for a in alerts}
    inline: list[tuple[str, bytes]] = []
    charts_by_id: dict[int, tuple[str, str]] = {}
    for facts in ordered:
        if len(inline) >= CHARTS_PER_EMAIL:
            break
        drawn = _chart(by_id[facts.id], facts)
        if drawn is not None:
            content_id = f"chart-{facts.id}@accelboard"
            inline.append((content_id, drawn[0]))
            charts_by_id[facts.id] = (content_id, drawn[1])
    items = {
        f.id: _item(f, user_id=user_id, delivery_id=delivery_id, chart=charts_by_id.get(f.id))
        for f in ordered
    }
    sections = []
    if digest:
        for section in content.digest_sections(ordered):
            sections.append(
                {
                    "team": section.team,
                    "counts": section.counts,
                    "groups": [
                        {
                            "commit": content.short_commit(g.commit),
                            "heading": g.heading,
                            "items": [items[a.id] for a in g.alerts],
                        }
                        for g in section.groups
                    ],
                }
            )
    unsubscribe = links.absolute(links.unsubscribe_path(token))
    worst = ordered[0]
    commit = worst.commit if all(f.commit == worst.commit for f in ordered) else ""
    context = {
        "digest": digest,
        "day": day,
        "count": len(ordered),
        "items": [items[f.id] for f in ordered],
        "sections": sections,
        "counts": content.severity_counts(ordered),
        "team": worst.team,
        "teams": sorted({f.team for f in ordered}),
        "commit": content.short_commit(commit),
        "kind_plural": content.kind_plural(ordered),
        "unsubscribe_url": unsubscribe,
        "subscriptions_url": links.absolute(reverse("notifications:subscriptions")),
        "link_days": links.TRIAGE_MAX_AGE.days,
        "site_url": settings.SITE_URL,
    }
    subject = content.subject_for(alerts=ordered, digest=digest, day=day)
    message = AlertEmail(
        subject=subject,
        body=render_to_string("email/alerts.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        headers={
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
        inline_images=inline,
    )
    message.attach_alternative(render_to_string("email/alerts.html", context), "text/html")
    return message


def check_email_build(*, to: str, requested_by: str = "") -> EmailMultiAlternatives:
    """A short email that proves the mail settings work, naming what they are."""
    backend, host = mail_settings_summary()
    context = {
        "site_url": settings.SITE_URL,
        "from_email": settings.DEFAULT_FROM_EMAIL,
        "backend": backend,
        "host": host,
        "requested_by": requested_by,
        "sent_at": timezone.now(),
        "subscriptions_url": links.absolute(reverse("notifications:subscriptions")),
    }
    message = EmailMultiAlternatives(
        subject="[accelboard] Test email: alert emails can reach you",
        body=render_to_string("email/test.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        headers={"Auto-Submitted": "auto-generated"},
    )
    message.attach_alternative(render_to_string("email/test.html", context), "text/html")
    return message


def mail_settings_summary() -> tuple[str, str]:
    """(backend path, "host:port" or "") of the configured mail backend, for people to read."""
    mailers = getattr(settings, "MAILERS", None)
    if mailers is not None:
        default = mailers.get("default", {})
        options = default.get("OPTIONS", {})
        backend = str(default.get("BACKEND", "django.core.mail.backends.smtp.EmailBackend"))
        host = f"{options.get('host', 'localhost')}:{options.get('port', 25)}"
    else:
        backend = str(settings.EMAIL_BACKEND)
        host = f"{settings.EMAIL_HOST}:{settings.EMAIL_PORT}"
    return backend, host if backend.endswith("smtp.EmailBackend") else ""


def mail_connection() -> Any:
    """The configured backend: ``mailers.default`` on Django >= 6.1 (``MAILERS``), else
    ``get_connection()`` (``EMAIL_*``); one place so that neither raises a deprecation warning."""
    if django.VERSION >= (6, 1):
        return mail.mailers.default
    return mail.get_connection()
