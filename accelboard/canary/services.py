"""Writes for canary comparisons: the team's checks, and the alert a failing verdict opens.

``canary_checks_run`` (beat, every 5 minutes) evaluates each active check over its window ending
now; a **fail** opens one alert of kind ``canary`` (critical) through ``alerts.services.alert_raise``,
which the notifications app sends to the team's routes (family "production") and emails. The
dedupe key is ``canary:<check>:<UTC day>``: evaluating twice, or from two workers, opens nothing
new, and a canary failing all day is one alert a day, refreshed with the newest evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from accelboard.alerts.choices import AlertKind, Severity
from accelboard.alerts.services import alert_raise
from accelboard.benchmarks.models import Model
from accelboard.core.models import Team

from . import analysis
from .models import CanaryCheck
from .selectors import CanaryReport, canary_evaluate, canary_json


class CanaryCheckInvalid(ValueError):
    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def _selector(value: Any, *, field: str) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise CanaryCheckInvalid("a selector is a non-empty object of label names to values", field=field)
    if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()):
        raise CanaryCheckInvalid("label names and values are strings", field=field)
    return dict(value)


def canary_check_create(
    *,
    team: Team,
    model: Model,
    name: str,
    baseline: dict[str, str],
    canary: dict[str, str],
    window_minutes: int = 60,
    alpha: float = analysis.ALPHA,
    min_effects: dict[str, float] | None = None,
    active: bool = True,
) -> CanaryCheck:
    """Create (or update, by team and name) a canary check; bad input names its field."""
    b = _selector(baseline, field="baseline")
    c = _selector(canary, field="canary")
    if b == c:
        raise CanaryCheckInvalid("the canary's selector must differ from the baseline's", field="canary")
    if not 0 < alpha < 0.5:
        raise CanaryCheckInvalid("alpha is between 0 and 0.5", field="alpha")
    if window_minutes < 1:
        raise CanaryCheckInvalid("the window is at least a minute", field="window_minutes")
    effects = dict(min_effects or {})
    for key, value in effects.items():
        if key not in analysis.METRIC_KEYS:
            raise CanaryCheckInvalid(f"unknown metric {key!r}", field=f"min_effects.{key}")
        if not isinstance(value, int | float) or value < 0:
            raise CanaryCheckInvalid("a minimum effect is a non-negative number", field=f"min_effects.{key}")
    check, _ = CanaryCheck.objects.update_or_create(
        team=team,
        name=name,
        defaults={
            "model": model,
            "baseline": b,
            "canary": c,
            "window_minutes": window_minutes,
            "alpha": alpha,
            "min_effects": effects,
            "active": active,
        },
    )
    return check


@dataclass(frozen=True)
class CanaryOutcome:
    check_id: int
    verdict: str
    alert_id: int | None
    created: bool


def canary_alert_raise(*, report: CanaryReport) -> tuple[int, bool] | None:
    """Open (or refresh) the day's alert of a failing verdict; None when it does not fail."""
    verdict = report.verdict
    if verdict.verdict != analysis.FAIL:
        return None
    check = report.check
    failing = [m for m in verdict.metrics if m.verdict == analysis.FAIL]
    head = max(failing, key=lambda m: (m.worse_by or 0) / (m.min_effect or 1))
    names = ", ".join(m.label for m in failing)
    alert, created = alert_raise(
        team=check.team,
        kind=AlertKind.CANARY,
        severity=Severity.CRITICAL,
        dedupe_key=f"canary:{check.pk}:{report.end:%Y-%m-%d}",
        title=f"Canary {check.name} of {check.model.name} fails: {names}",
        before_mean=head.baseline_median,
        after_mean=head.canary_median,
        pct_change=(head.effect or 0) * 100 if head.relative else None,
        confidence=1 - head.p_value if head.p_value is not None else None,
        min_effect=head.min_effect,
        detail={"canary": canary_json(report), "check_id": check.pk},
        opened_at=report.end,
    )
    return alert.pk, created


def canary_checks_run(*, now: datetime | None = None) -> list[CanaryOutcome]:
    """Evaluate every active check over its window ending ``now``; alert on the failing ones."""
    now = now or timezone.now()
    outcomes = []
    for check in CanaryCheck.objects.filter(active=True).select_related("team", "model").order_by("pk"):
        report = canary_evaluate(check=check, end=now)
        raised = canary_alert_raise(report=report)
        outcomes.append(
            CanaryOutcome(
                check_id=check.pk,
                verdict=report.verdict.verdict,
                alert_id=raised[0] if raised else None,
                created=bool(raised and raised[1]),
            )
        )
    return outcomes
