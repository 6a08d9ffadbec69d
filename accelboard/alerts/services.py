"""Writes of the alerts app: raising alerts idempotently and moving them through their states.

1. ``alert_raise`` is an upsert on ``dedupe_key`` (unique): two workers raising the same change
   get one row; the loser gets ``created=False``. An alert still open or acknowledged takes the
   newer evidence (a window with more results after the change refines the levels).
2. Transitions (acknowledge, resolve, dismiss, mark expected) are conditional UPDATEs
   ``WHERE state = <state read>``: a transition goes on only if the row is still in the state it
   was read in, so two people (or a person and the detector) cannot both move one alert. Each
   transition writes one AlertEvent. An impossible transition raises ``AlertTransitionError``
   with a sentence a page can show.
3. A benchmark change that moved several metrics of one configuration at one run is one alert:
   ``alert_metric_record`` adds each metric to it (one ``AlertMetric`` row each) and keeps the
   alert's headline (series, evidence, severity, title) on its worst metric.
4. New alerts are announced (``events.alerts_opened``) after the transaction commits; the
   notifications app reacts by mailing them.

The per-run benchmark check (``regression_services``) and the production rules
(``production_services``) call these.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.core.models import Team

from . import severity as severity_rule
from .choices import AlertState, DismissReason, ExpectedScope, Severity
from .events import alerts_closed, alerts_opened
from .models import Alert, AlertEvent, AlertMetric, ExpectedChange

logger = logging.getLogger(__name__)

_ACTIVE = (AlertState.OPEN, AlertState.ACKNOWLEDGED)
_EVIDENCE = (
    "before_mean",
    "before_spread",
    "after_mean",
    "after_spread",
    "pct_change",
    "confidence",
)


class AlertTransitionError(Exception):
    """A transition the alert's current state does not allow (the message is for people)."""


def alert_raise(
    *,
    team: Team,
    kind: str,
    severity: str = Severity.WARNING,
    dedupe_key: str,
    title: str,
    series: Series | None = None,
    host: Any = None,
    first_run: BenchmarkRun | None = None,
    last_good_run: BenchmarkRun | None = None,
    before_mean: float | None = None,
    before_spread: float | None = None,
    after_mean: float | None = None,
    after_spread: float | None = None,
    pct_change: float | None = None,
    confidence: float | None = None,
    min_effect: float | None = None,
    detail: dict[str, Any] | None = None,
    opened_at: Any = None,
) -> tuple[Alert, bool]:
    """Open the alert for one change, or return the one already open for it.

    Idempotent on ``dedupe_key``: safe to call again for the same change and from two workers at
    once (the unique index decides; the loser reads the winner's row). Returns (alert, created).
    ``opened_at`` defaults to now; a replay of loaded history passes the time of the run that
    revealed the change, so the alert sits where it would have been raised.
    """
    if not dedupe_key or len(dedupe_key) > 200:
        raise ValueError("dedupe_key must be 1 to 200 characters")
    evidence = {
        "before_mean": before_mean,
        "before_spread": before_spread,
        "after_mean": after_mean,
        "after_spread": after_spread,
        "pct_change": pct_change,
        "confidence": confidence,
    }
    now = opened_at or timezone.now()
    with transaction.atomic():
        alert, created = Alert.objects.get_or_create(
            dedupe_key=dedupe_key,
            defaults={
                "team": team,
                "kind": kind,
                "severity": severity,
                "title": title[:300],
                "series": series,
                "host": host,
                "first_run": first_run,
                "last_good_run": last_good_run,
                "min_effect": min_effect,
                "detail": detail or {},
                "opened_at": now,
                **evidence,
            },
        )
        if created:
            AlertEvent.objects.create(alert=alert, at=now, to_state=AlertState.OPEN, reason="detected")
            alerts_opened.publish(alert_ids=[alert.pk])
        else:
            fresh: dict[str, Any] = {k: v for k, v in evidence.items() if v is not None}
            if detail is not None:
                fresh["detail"] = detail
            if fresh and Alert.objects.filter(pk=alert.pk, state__in=_ACTIVE).update(**fresh):
                for name, value in fresh.items():
                    setattr(alert, name, value)
    return alert, created


def alert_metric_record(
    *,
    alert: Alert,
    series: Series,
    severity: str,
    evidence: dict[str, float | None],
    min_effect: float | None,
    checked_run: int | None,
    title: Any = None,
    detail: dict[str, Any] | None = None,
    first_run: int | None = None,
) -> AlertMetric:
    """Add one metric's evidence to a change alert (or refresh it), then re-pick the headline.

    ``title(member, others) -> str`` names the alert after its headline metric; ``detail`` is
    this metric's detector detail, the alert's own once this metric is the headline. Safe to call twice: one row per (alert, series). A closed alert keeps its severity
    and headline (people judged it as it was); the metric is still recorded, for the baseline.
    """
    with transaction.atomic():
        member, created = AlertMetric.objects.get_or_create(
            alert=alert,
            series=series,
            defaults={
                "severity": severity,
                "min_effect": min_effect,
                "checked_run": checked_run,
                "first_run": first_run,
                **evidence,
            },
        )
        active = Alert.objects.filter(pk=alert.pk, state__in=_ACTIVE).exists()
        if not created and active:
            fresh = {k: v for k, v in evidence.items() if v is not None}
            AlertMetric.objects.filter(pk=member.pk).update(severity=severity, **fresh)
            for name, value in {"severity": severity, **fresh}.items():
                setattr(member, name, value)
        if active:
            _headline_sync(alert=alert, title=title, detail={series.pk: detail} if detail else {})
    return member


def _headline_sync(*, alert: Alert, title: Any, detail: dict[int, dict[str, Any]]) -> None:
    """Point the alert at its worst metric: series, evidence, severity and title follow it."""
    members = list(AlertMetric.objects.filter(alert=alert).select_related("series"))
    head = severity_rule.worst(
        severity_rule.MetricEffect(
            key=m.series_id,
            metric=m.series.metric,
            severity=m.severity,
            pct_change=m.pct_change,
            min_effect=m.min_effect,
        )
        for m in members
    )
    if head is None:
        return
    top = next(m for m in members if m.series_id == head.key)
    fields: dict[str, Any] = {
        "series": top.series,
        "severity": top.severity,
        "min_effect": top.min_effect,
        **{name: getattr(top, name) for name in _EVIDENCE},
    }
    if title is not None:
        fields["title"] = str(title(top, len(members) - 1))[:300]
    merged = {**alert.detail, **detail.get(top.series_id, {})}
    merged.update({"metric": top.series.metric, "unit": top.series.unit, "direction": top.series.direction})
    fields["detail"] = merged
    Alert.objects.filter(pk=alert.pk).update(**fields)
    for name, value in fields.items():
        setattr(alert, name, value)


def _transition(
    *,
    alert: Alert,
    allowed_from: tuple[str, ...],
    to: str,
    verb: str,
    user: Any = None,
    reason: str = "",
    note: str = "",
    fields: dict[str, Any] | None = None,
) -> Alert:
    """Move ``alert`` to ``to`` if (and only if) it is still in the state just read."""
    now = timezone.now()
    with transaction.atomic():
        current = Alert.objects.filter(pk=alert.pk).values_list("state", flat=True).first()
        if current is None:
            raise AlertTransitionError(f"Alert #{alert.pk} no longer exists.")
        if current not in allowed_from:
            allowed = " or ".join(AlertState(s).label.lower() for s in allowed_from)
            raise AlertTransitionError(
                f"Alert #{alert.pk} is {AlertState(current).label.lower()}; only {allowed} alerts can be {verb}."
            )
        changed = Alert.objects.filter(pk=alert.pk, state=current).update(state=to, **(fields or {}))
        if not changed:
            raise AlertTransitionError(f"Alert #{alert.pk} was changed by someone else just now; reload it.")
        AlertEvent.objects.create(
            alert_id=alert.pk,
            actor=user if getattr(user, "is_authenticated", False) else None,
            at=now,
            from_state=current,
            to_state=to,
            reason=reason,
            note=note,
        )
        if to in (AlertState.RESOLVED, AlertState.DISMISSED):
            alerts_closed.publish(alert_ids=[alert.pk])
    alert.refresh_from_db()
    return alert


def alert_acknowledge(*, alert: Alert, user: Any) -> Alert:
    """open -> acknowledged: someone is looking at it (it is not mailed again)."""
    return _transition(
        alert=alert,
        allowed_from=(AlertState.OPEN,),
        to=AlertState.ACKNOWLEDGED,
        verb="acknowledged",
        user=user,
        fields={"acknowledged_at": timezone.now(), "acknowledged_by": user},
    )


def alert_resolve(*, alert: Alert, user: Any = None, note: str = "", reason: str = "") -> Alert:
    """open | acknowledged -> resolved; ``user`` None when the detector saw the values come back."""
    return _transition(
        alert=alert,
        allowed_from=_ACTIVE,
        to=AlertState.RESOLVED,
        verb="resolved",
        user=user,
        reason=reason or ("manual" if user is not None else "auto"),
        note=note,
        fields={"resolved_at": timezone.now()},
    )


def alert_dismiss(*, alert: Alert, user: Any, reason: str, note: str = "") -> Alert:
    """open | acknowledged -> dismissed, with a reason (false-alarm | expected) kept as feedback."""
    if reason not in DismissReason.values:
        raise AlertTransitionError(
            f"Unknown dismiss reason {reason!r}: use one of {', '.join(DismissReason.values)}."
        )
    return _transition(
        alert=alert,
        allowed_from=_ACTIVE,
        to=AlertState.DISMISSED,
        verb="dismissed",
        user=user,
        reason=reason,
        note=note,
        fields={"dismissed_reason": reason, "dismissed_note": note},
    )


def alert_mark_expected(
    *, alert: Alert, user: Any, scope: str = ExpectedScope.SERIES, note: str = ""
) -> Alert:
    """Dismiss as expected and record an ExpectedChange that restarts the baseline at the change.

    ``scope="series"`` marks the alert's series (each metric the change moved); ``scope="run"`` every series with a result in
    the alert's first bad run (one commit that moved fifty series is marked once).
    """
    if scope not in ExpectedScope.values:
        raise AlertTransitionError(f"Unknown scope {scope!r}: use 'series' or 'run'.")
    if alert.series_id is None or alert.first_run_id is None:
        raise AlertTransitionError(
            f"Alert #{alert.pk} is not about a benchmark series change, so there is no baseline to move; "
            "dismiss it instead."
        )
    with transaction.atomic():
        alert = alert_dismiss(alert=alert, user=user, reason=DismissReason.EXPECTED, note=note)
        first_run_id, series_id = alert.first_run_id, alert.series_id  # both checked above
        assert first_run_id is not None and series_id is not None
        if scope == ExpectedScope.RUN:
            series_ids = list(
                Series.objects.filter(points__run_id=alert.first_run_id)
                .values_list("id", flat=True)
                .distinct()
            )
        else:
            # The alert's change, every metric it holds (the headline's series at least).
            series_ids = sorted(
                {series_id, *AlertMetric.objects.filter(alert=alert).values_list("series_id", flat=True)}
            )
        now = timezone.now()
        ExpectedChange.objects.bulk_create(
            [
                ExpectedChange(
                    team_id=alert.team_id,
                    series_id=sid,
                    run_id=first_run_id,
                    scope=scope,
                    alert=alert,
                    created_by=user if getattr(user, "is_authenticated", False) else None,
                    created_at=now,
                    note=note,
                )
                for sid in series_ids
            ],
            ignore_conflicts=True,
        )
        if scope == ExpectedScope.RUN:
            # The same commit's other open alerts are the same intended change: close them too.
            siblings = (
                Alert.objects.filter(first_run_id=alert.first_run_id, state__in=_ACTIVE)
                .filter(Q(series_id__in=series_ids) | Q(metrics__series_id__in=series_ids))
                .exclude(pk=alert.pk)
                .distinct()
            )
            for sibling in siblings:
                try:
                    alert_dismiss(alert=sibling, user=user, reason=DismissReason.EXPECTED, note=note)
                except AlertTransitionError:
                    continue  # moved by someone else meanwhile: their decision stands
    return alert


BULK_ACTIONS = ("acknowledge", "dismiss")


def alerts_bulk_triage(*, alerts: list[Alert], user: Any, action: str, reason: str = "") -> int:
    """Acknowledge, or dismiss with ``reason``, every alert: all or none.

    One refused transition (an alert resolved meanwhile) rolls the others back and raises
    ``AlertTransitionError`` naming that alert. Returns how many alerts moved."""
    if action not in BULK_ACTIONS:
        raise AlertTransitionError(f"Unknown bulk action {action!r}: use one of {', '.join(BULK_ACTIONS)}.")
    with transaction.atomic():
        for alert in alerts:
            try:
                if action == "acknowledge":
                    alert_acknowledge(alert=alert, user=user)
                else:
                    alert_dismiss(alert=alert, user=user, reason=reason)
            except AlertTransitionError as exc:
                raise AlertTransitionError(f"alert {alert.pk} ({alert.title}): {exc}") from exc
    return len(alerts)
