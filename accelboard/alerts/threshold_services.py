"""Writes of a team's alerting thresholds: minimum effect sizes of the regression detector and the
production objectives (SLOs) of its served models. Team leads set them on the team page.

Kept apart from ``services.py`` (the alert life cycle): these rows are configuration the detector
and the production pass read (``selectors.min_effect_for_series``, ``production_services``).
"""

from __future__ import annotations

from django.db import transaction

from accelboard.benchmarks.models import Model, ModelVariant
from accelboard.core.models import Team

from .models import DetectionSetting, ServingSlo

# A minimum effect outside this range is a typo (0.5% would alert on noise; 90% never alerts).
MIN_EFFECT_RANGE = (0.005, 0.9)


class ThresholdError(ValueError):
    """Bad threshold input; ``field`` names the form field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def detection_setting_set(*, team: Team, metric: str, min_effect: float) -> DetectionSetting:
    """The team's minimum effect for ``metric`` (blank: every metric), as a fraction (0.03 = 3%)."""
    low, high = MIN_EFFECT_RANGE
    if not low <= min_effect <= high:
        raise ThresholdError("min_effect", f"must be between {low:.1%} and {high:.0%}, not {min_effect:.2%}")
    setting, _ = DetectionSetting.objects.update_or_create(
        team=team, metric=metric.strip(), defaults={"min_effect": min_effect}
    )
    return setting


def detection_setting_delete(*, team: Team, setting_id: int) -> bool:
    deleted, _ = DetectionSetting.objects.filter(team=team, pk=setting_id).delete()
    return bool(deleted)


@transaction.atomic
def serving_slo_set(
    *,
    team: Team,
    model: Model,
    variant: ModelVariant | None,
    p99_latency_ms: float | None,
    min_tokens_per_s: float | None,
) -> ServingSlo:
    """The p99 latency ceiling and tokens/s floor of a served model (or one of its variants)."""
    if p99_latency_ms is None and min_tokens_per_s is None:
        raise ThresholdError("p99_latency_ms", "give a p99 latency, a tokens/s floor, or both")
    for field, value in (("p99_latency_ms", p99_latency_ms), ("min_tokens_per_s", min_tokens_per_s)):
        if value is not None and value <= 0:
            raise ThresholdError(field, f"must be positive, not {value:g}")
    if variant is not None and variant.model_id != model.pk:
        raise ThresholdError("variant", f"{variant.name} is not a variant of {model.name}")
    slo, _ = ServingSlo.objects.update_or_create(
        team=team,
        model=model,
        variant=variant,
        defaults={"p99_latency_ms": p99_latency_ms, "min_tokens_per_s": min_tokens_per_s},
    )
    return slo


def serving_slo_delete(*, team: Team, slo_id: int) -> bool:
    deleted, _ = ServingSlo.objects.filter(team=team, pk=slo_id).delete()
    return bool(deleted)
