"""Reads of the alerts app: feedback figures and the detection settings in force."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from accelboard.benchmarks.models import Series

from .choices import AlertKind, AlertState, DismissReason
from .detection import DEFAULT_MIN_EFFECT
from .models import Alert, DetectionSetting, ExpectedChange


@dataclass(frozen=True)
class FeedbackRow:
    """People's verdicts on alerts of one group: how many were called false alarms."""

    key: Any  # team id, or the minimum effect in force (None: not recorded)
    label: str
    alerts: int
    false_alarms: int
    confirmed: int  # acknowledged, resolved by a person, or dismissed as expected

    @property
    def judged(self) -> int:
        return self.false_alarms + self.confirmed

    @property
    def false_positive_rate(self) -> float | None:
        """False alarms over alerts people gave a verdict on; None until someone has."""
        return self.false_alarms / self.judged if self.judged else None


# A person confirmed the change was real: acknowledged it, resolved it, or said it was intended.
_CONFIRMED = (
    Q(acknowledged_at__isnull=False)
    | Q(state=AlertState.RESOLVED, events__to_state=AlertState.RESOLVED, events__actor__isnull=False)
    | Q(state=AlertState.DISMISSED, dismissed_reason=DismissReason.EXPECTED)
)
_FALSE = Q(state=AlertState.DISMISSED, dismissed_reason=DismissReason.FALSE_ALARM)
# An alert first acknowledged, then dismissed as a false alarm, is a false alarm: the later
# verdict wins, and no alert counts on both sides.
_CONFIRMED = _CONFIRMED & ~_FALSE


def alert_feedback_stats(*, team_ids: Iterable[int]) -> dict[str, list[FeedbackRow]]:
    """False-positive rate of benchmark alerts per team and per minimum-effect threshold.

    Feedback is what people did: a dismissal as false alarm counts against the detector; an
    acknowledgement, a manual resolve or a dismissal as expected counts for it. Alerts nobody
    touched (or that resolved by themselves) are counted in ``alerts`` but not judged.
    """
    base = Alert.objects.filter(
        team_id__in=list(team_ids), kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT]
    )
    aggregates = {
        "alerts": Count("id", distinct=True),
        "false_alarms": Count("id", filter=_FALSE, distinct=True),
        "confirmed": Count("id", filter=_CONFIRMED, distinct=True),
    }
    per_team = [
        FeedbackRow(
            key=row["team_id"],
            label=row["team__name"],
            alerts=row["alerts"],
            false_alarms=row["false_alarms"],
            confirmed=row["confirmed"],
        )
        for row in base.values("team_id", "team__name").annotate(**aggregates).order_by("team__name")
    ]
    per_threshold = [
        FeedbackRow(
            key=row["min_effect"],
            label="not recorded" if row["min_effect"] is None else f"{row['min_effect']:.1%}",
            alerts=row["alerts"],
            false_alarms=row["false_alarms"],
            confirmed=row["confirmed"],
        )
        for row in base.values("min_effect").annotate(**aggregates).order_by("min_effect")
    ]
    return {"teams": per_team, "thresholds": per_threshold}


def min_effect_for_series(*, series: Series) -> float:
    """Series override, else the team's setting for the metric, else its default, else the detector's."""
    if series.min_effect is not None:
        return float(series.min_effect)
    settings = dict(
        DetectionSetting.objects.filter(team_id=series.team_id, metric__in=[series.metric, ""]).values_list(
            "metric", "min_effect"
        )
    )
    if series.metric in settings:
        return float(settings[series.metric])
    if "" in settings:
        return float(settings[""])
    return DEFAULT_MIN_EFFECT


def expected_change_runs(*, series: Series) -> list[int]:
    """Ids of the runs at which a person said this series' level changed on purpose."""
    return list(ExpectedChange.objects.filter(series=series).values_list("run_id", flat=True))
