"""Reads of the alerts app: feedback figures, the detection settings in force, and a run against
its series' baselines (the detector's verdict per metric, for the run page and the upload API)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber

from accelboard.benchmarks import selectors as benchmark_selectors
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.core.access import Scope
from accelboard.core.models import Team

from . import detection
from .choices import AlertKind, AlertState, DismissReason
from .detection import DEFAULT_MIN_EFFECT
from .levels import baseline_resolve
from .models import Alert, DetectionSetting, ExpectedChange, ServingSlo


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


def alert_feedback_stats(
    *, scope: Scope, alerts: QuerySet[Alert] | None = None
) -> dict[str, list[FeedbackRow]]:
    """False-positive rate of benchmark alerts per team and per minimum-effect threshold.

    Feedback is what people did: a dismissal as false alarm counts against the detector; an
    acknowledgement, a manual resolve or a dismissal as expected counts for it. Alerts nobody
    touched (or that resolved by themselves) are counted in ``alerts`` but not judged.
    ``alerts``: the alerts a page shows (its team filter and the rest, already within ``scope``),
    so its feedback covers the same teams as its list; else every alert ``scope`` may see.
    """
    visible = Alert.objects.visible_to(scope) if alerts is None else alerts
    base = visible.filter(kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT])
    aggregates = {
        "alerts": Count("id", distinct=True),
        "false_alarms": Count("id", filter=_FALSE, distinct=True),
        "confirmed": Count("id", filter=_CONFIRMED, distinct=True),
    }
    per_team_rows: Iterable[Any] = (
        base.values("team_id", "team__name").annotate(**aggregates).order_by("team__name")
    )
    per_threshold_rows: Iterable[Any] = (
        base.values("min_effect").annotate(**aggregates).order_by("min_effect")
    )
    per_team = [
        FeedbackRow(
            key=row["team_id"],
            label=row["team__name"],
            alerts=row["alerts"],
            false_alarms=row["false_alarms"],
            confirmed=row["confirmed"],
        )
        for row in per_team_rows
    ]
    per_threshold = [
        FeedbackRow(
            key=row["min_effect"],
            label="not recorded" if row["min_effect"] is None else f"{row['min_effect']:.1%}",
            alerts=row["alerts"],
            false_alarms=row["false_alarms"],
            confirmed=row["confirmed"],
        )
        for row in per_threshold_rows
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


def detection_settings_for_team(*, team: Team) -> list[DetectionSetting]:
    """The team's minimum-effect thresholds, by metric ("" = every metric first)."""
    return list(DetectionSetting.objects.filter(team=team).order_by("metric"))


def serving_slos_for_team(*, team: Team) -> list[ServingSlo]:
    """The team's serving objectives, by model."""
    return list(
        ServingSlo.objects.filter(team=team).select_related("model", "variant").order_by("model__name")
    )


def expected_change_runs(*, series: Series) -> list[int]:
    """Ids of the runs at which a person said this series' level changed on purpose."""
    return list(ExpectedChange.objects.filter(series=series).values_list("run_id", flat=True))


# --- A run against its series' baselines --------------------------------------------------------

# Earlier results read per series: the baseline (``levels.baseline_resolve``) is a segment of them,
# and the detector reads as far back to estimate the series' noise.
HISTORY_POINTS = 200
# No detector verdict: the series has no earlier result to compare with.
VERDICT_NEW = "new"


def _baseline_marks(
    *, series_ids: list[int], before: datetime
) -> tuple[dict[int, datetime], dict[int, set[int]]]:
    """Per series, when its current baseline starts (the last change a person marked expected),
    and the first bad runs of its open or acknowledged regression alerts. One query.

    Marking a change expected resets the baseline, so results before the change's first run no
    longer count; an open regression holds the baseline at the level before it
    (``levels.baseline_resolve``)."""
    resets: dict[int, datetime] = {}
    holds: dict[int, set[int]] = {}
    # Every metric of a change alert (one change is one alert, ``AlertMetric`` per metric), and
    # the alert's own series (an alert raised without metric rows).
    wanted = set(series_ids)
    alerts = (
        Alert.objects.filter(
            Q(dismissed_reason=DismissReason.EXPECTED)
            | Q(kind=AlertKind.REGRESSION, state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED]),
            Q(series_id__in=series_ids) | Q(metrics__series_id__in=series_ids),
            first_run__isnull=False,
            first_run__started_at__lte=before,
        )
        .order_by("-first_run__started_at", "pk")
        .values_list(
            "series_id", "metrics__series_id", "first_run__started_at", "first_run_id", "dismissed_reason"
        )
    )
    for headline_id, member_id, started_at, first_run_id, reason in alerts:
        for series_id in {headline_id, member_id} & wanted:
            if reason == DismissReason.EXPECTED:
                resets.setdefault(series_id, started_at)
            else:
                holds.setdefault(series_id, set()).add(first_run_id)
    return resets, holds


def run_baseline_runs(*, run: BenchmarkRun) -> list[int]:
    """The runs "Compare with baseline" sets against ``run``: the few runs of its series just before
    it, or, while a regression of one of its series is open (``levels.baseline_resolve``, 2a),
    just before that regression's first bad run, so the comparison is with the level before the
    change rather than with the regressed runs. One query."""
    held = (
        Alert.objects.filter(
            kind=AlertKind.REGRESSION,
            state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED],
            series__team_id=run.team_id,
            series__workload_id=run.workload_id,
            series__accelerator_type_id=run.accelerator_type_id,
            series__accelerator_count=run.accelerator_count,
            first_run__started_at__lte=run.started_at,
        )
        .order_by("first_run__started_at")
        .values("first_run__started_at")[:1]
    )
    return benchmark_selectors.run_baseline_ids(run=run, held_since=Subquery(held))


def run_baseline_compare(*, run: BenchmarkRun) -> list[dict[str, Any]]:
    """Each metric of ``run`` against its series: baseline, delta % and the detector's verdict.

    1. History: the series' valid results before this run (by time, then by run id for results at
       the same instant), since the last expected-change mark, newest ``HISTORY_POINTS``.
    2. Baseline: ``levels.baseline_resolve`` over them (the definition the trends page and the
       alert charts use): the median of the current segment after the detector's last change
       point, or, while a regression alert is open, of the segment before its first bad run;
       delta % = (value - baseline) / |baseline| x 100 (None with no history or a zero baseline).
    3. Verdict: ``detection.check_latest`` on history + this value, with the runs' repeated
       samples and the series' own minimum effect; ``"new"`` when there is no history.
    Two queries whatever the number of metrics (metrics, then all histories in one window query).
    """
    values = list(run.metrics.select_related("series").order_by("name"))
    series_ids = [value.series_id for value in values]
    resets, holds = _baseline_marks(series_ids=series_ids, before=run.started_at)
    earlier = Q(measured_at__lt=run.started_at) | Q(measured_at=run.started_at, run_id__lt=run.pk)
    rows = (
        MetricValue.objects.filter(earlier, series_id__in=series_ids, run__valid=True)
        .exclude(run_id=run.pk)
        .annotate(
            newest=Window(
                RowNumber(),
                partition_by=[F("series_id")],
                order_by=[F("measured_at").desc(), F("run_id").desc()],
            )
        )
        .filter(newest__lte=HISTORY_POINTS)
        .values_list("series_id", "value", "samples", "measured_at", "newest", "run_id")
    )
    history: dict[int, list[tuple[int, float, list[float], int]]] = {}
    for series_id, value, samples, measured_at, newest, run_id in rows:
        reset = resets.get(series_id)
        if reset is not None and measured_at < reset:
            continue
        history.setdefault(series_id, []).append((newest, value, samples or [], run_id))
    result = []
    for metric in values:
        points = sorted(history.get(metric.series_id, []), key=lambda item: -item[0])  # oldest first
        past = [value for _, value, _, _ in points]
        min_effect = (
            metric.series.min_effect if metric.series.min_effect is not None else detection.DEFAULT_MIN_EFFECT
        )
        held = holds.get(metric.series_id, set())
        view = (
            baseline_resolve(
                values=past,
                changes=[
                    cp.index
                    for cp in detection.segment(past, direction=metric.direction, min_effect=min_effect)
                ],
                holds=[i for i, point in enumerate(points) if point[3] in held],
            )
            if past
            else None
        )
        baseline = view.baseline.level if view else None
        delta_pct = (metric.value - baseline) / abs(baseline) * 100 if baseline else None
        entry: dict[str, Any] = {
            "name": metric.name,
            "value": metric.value,
            "unit": metric.unit,
            "direction": metric.direction,
            "series_id": metric.series_id,
            "baseline": baseline,
            "baseline_points": view.baseline.count if view else 0,
            "delta_pct": delta_pct,
            "verdict": VERDICT_NEW,
            "confidence": None,
            "pct_change": None,
            "reason": "first result of this series" if not past else "",
        }
        if past:
            samples = [list(s) or None for _, _, s, _ in points] + [list(metric.samples) or None]
            has_samples = any(s is not None for s in samples)
            verdict = detection.check_latest(
                [*past, metric.value],
                direction=metric.direction,
                samples=samples if has_samples else None,
                min_effect=min_effect,
            )
            entry.update(
                verdict=verdict.kind,
                confidence=verdict.confidence,
                pct_change=verdict.pct_change,
                reason=verdict.reason,
            )
        result.append(entry)
    return result
