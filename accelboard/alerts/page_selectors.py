"""Reads for the alert pages: the filtered list, counts by state, one alert with its evidence.

Kept apart from ``selectors.py`` (the detectors' and emails' reads) so the two sides of the app
grow without stepping on each other. Every read a page starts from takes the caller's ``Scope``
(``accelboard.core.access``) and goes through ``Alert.objects.visible_to``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count, F

from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.core.access import Scope
from accelboard.core.models import Team
from accelboard.importers.metrics import metric_label

from . import severity as severity_rule
from .charts import LevelSpan
from .choices import AlertState, Severity
from .detection import SPREAD_MIN_RESULTS
from .filters import AlertFilterSet
from .levels import Segment, change_levels
from .models import Alert, AlertEvent, AlertMetric, ExpectedChange

# A series chart wider than this is unreadable and slow; the change is near the end anyway.
CHART_POINTS = 400


def alert_filterset(*, scope: Scope, data: Mapping[str, Any] | None) -> AlertFilterSet:
    """The alerts list: the alerts the caller may see, filtered by ``data`` (the query string),
    newest first, ready for a table row; select choices from the same alerts."""
    alerts = (
        Alert.objects.visible_to(scope)
        .select_related("team", "host", "series__workload__variant__model", "series__accelerator_type")
        .order_by("-opened_at", "-pk")
    )
    return AlertFilterSet(data, queryset=alerts, choices=alert_filter_choices(scope=scope))


def alert_state_counts(*, filterset: AlertFilterSet) -> dict[str, int]:
    """Alerts per state under every filter but the state one (so the counts say what a click on
    a state would show). Every state is present, zero or not."""
    rows = filterset.qs_without("state").order_by().values("state").annotate(n=Count("pk"))
    counts = {state: 0 for state in AlertState.values}
    counts.update({row["state"]: row["n"] for row in rows})
    return counts


def alert_filter_choices(*, scope: Scope) -> dict[str, list[tuple[str, str]]]:
    """Choices for the team, model and metric filters, from what the caller may see."""
    teams = Team.objects.visible_to(scope)
    alerts = Alert.objects.visible_to(scope)
    models = set(
        alerts.exclude(series__isnull=True).values_list("series__workload__variant__model__name", flat=True)
    )
    metrics = set(alerts.exclude(series__isnull=True).values_list("series__metric", flat=True))
    # Production alerts name their model and metric in the detail JSON: read only those keys.
    named = (
        alerts.filter(series__isnull=True)
        .order_by()
        .values_list("detail__model", "detail__metric")
        .distinct()
    )
    for model, metric in named:
        if isinstance(model, str) and model:
            models.add(model)
        if isinstance(metric, str) and metric:
            metrics.add(metric)
    return {
        "team": [(t.slug, t.name) for t in teams.order_by("name")],
        "model": [(m, m) for m in sorted(models)],
        "metric": [(m, m) for m in sorted(metrics)],
    }


def alerts_get_visible(*, scope: Scope, alert_ids: list[int]) -> tuple[list[Alert], list[int]]:
    """The alerts among ``alert_ids`` the caller may see, and the ids that are not (sorted)."""
    alerts = list(Alert.objects.visible_to(scope).select_related("team").filter(pk__in=alert_ids))
    return alerts, sorted(set(alert_ids) - {a.pk for a in alerts})


def alert_get_visible(*, alert_id: int, scope: Scope) -> Alert:
    """One alert with everything its page shows in one query; DoesNotExist when out of scope."""
    return (
        Alert.objects.visible_to(scope)
        .select_related(
            "team",
            "host",
            "acknowledged_by",
            "series__workload__variant__model",
            "series__accelerator_type",
            "first_run",
            "last_good_run",
        )
        .get(pk=alert_id)
    )


def alert_series_points(*, alert: Alert, limit: int = CHART_POINTS) -> list[dict[str, Any]]:
    """The alert's series, oldest first, at most ``limit`` points that include the change.

    Usually the last ``limit`` points (the change and what came after it). For an old alert whose
    change lies before them, a window around the change instead: up to ``limit`` * 5/8 points
    before the first bad run and the rest after it, so the red line is never off the chart."""
    if alert.series_id is None:
        return []
    values = MetricValue.objects.filter(series_id=alert.series_id).values(
        "measured_at", "value", "run_id", git_commit=F("run__git_commit")
    )
    rows: list[dict[str, Any]] = [dict(r) for r in values.order_by("-measured_at", "-pk")[:limit]]
    rows.reverse()
    change_at = alert.first_run.started_at if alert.first_run_id and alert.first_run else None
    if change_at is None or len(rows) < limit or rows[0]["measured_at"] <= change_at:
        return rows
    before = [
        dict(r)
        for r in values.filter(measured_at__lt=change_at).order_by("-measured_at", "-pk")[: limit * 5 // 8]
    ]
    before.reverse()
    after = [
        dict(r)
        for r in values.filter(measured_at__gte=change_at).order_by("measured_at", "pk")[
            : limit - len(before)
        ]
    ]
    return before + after


def alert_chart_levels(
    *, alert: Alert, points: Sequence[Mapping[str, Any]], marks_at: Sequence[datetime] = ()
) -> tuple[LevelSpan | None, LevelSpan | None]:
    """The levels before and after the alert's change over the chart's ``points`` (oldest first,
    with ``run_id``, ``measured_at`` and ``value``), each over the results it holds
    (``alerts.levels.change_levels``). The other boundaries are those the detector stored with
    the alert (``detail["change_runs"]``, its revert) and ``marks_at``, the expected changes: the
    page shows the evidence the alert was raised on, without running the detector again. No query.
    """
    position = {p["run_id"]: i for i, p in enumerate(points)}
    first = position.get(alert.first_run_id)
    if first is None:
        return None, None
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    stored = detail.get("change_runs")
    changes = [position[r] for r in stored if r in position] if isinstance(stored, list) else []
    fixed = [position[r] for r in [detail.get("reverted_at_run")] if r in position]
    times = [p["measured_at"] for p in points]
    fixed += [i for i in (next((i for i, t in enumerate(times) if t >= at), None) for at in marks_at) if i]
    before, after = change_levels(
        values=[float(p["value"]) for p in points], first=first, changes=changes, fixed=fixed
    )

    def span(segment: Segment | None) -> LevelSpan | None:
        if segment is None:
            return None
        # Fewer than three results have no spread of their own (as the alert's own "after").
        spread = segment.spread if segment.count >= SPREAD_MIN_RESULTS else None
        return LevelSpan(
            start=times[segment.start],
            end=times[segment.end],
            level=segment.level,
            spread=spread,
            count=segment.count,
        )

    return span(before), span(after)


def alert_run_range(*, alert: Alert) -> list[BenchmarkRun]:
    """The runs between the last good run and the first bad one, inclusive, oldest first: the
    commits that could have caused the change (several when runs were skipped or grouped)."""
    good, bad = alert.last_good_run, alert.first_run
    if good is None or bad is None or alert.series_id is None:
        return [run for run in (good, bad) if run is not None]
    series = alert.series
    assert series is not None  # alert.series_id was checked above
    return list(
        BenchmarkRun.objects.filter(
            team_id=alert.team_id,
            workload_id=series.workload_id,
            accelerator_type_id=series.accelerator_type_id,
            accelerator_count=series.accelerator_count,
            started_at__gte=good.started_at,
            started_at__lte=bad.started_at,
        ).order_by("started_at", "pk")[:50]
    )


def alert_events(*, alert: Alert) -> list[AlertEvent]:
    """The alert's history (who moved it from which state to which, when, why), oldest first."""
    return list(AlertEvent.objects.filter(alert=alert).select_related("actor").order_by("at", "pk"))


def alert_expected_marks(*, alert: Alert) -> list[ExpectedChange]:
    """Expected-change marks on the alert's series (each moved the baseline), oldest first."""
    if alert.series_id is None:
        return []
    return list(
        ExpectedChange.objects.filter(series_id=alert.series_id)
        .select_related("run", "created_by")
        .order_by("run__started_at", "pk")
    )


def alert_metric_rows(*, alert: Alert) -> list[dict[str, Any]]:
    """The metrics one change moved (a grouped change alert), the headline first, then in the
    order ``severity.headline_order`` ranks them; empty for an alert that holds none."""
    members = list(AlertMetric.objects.filter(alert=alert).select_related("series"))

    def order(m: AlertMetric) -> tuple[int, int, int, float, int]:
        effect = severity_rule.MetricEffect(
            key=m.series_id,
            metric=m.series.metric,
            severity=m.severity,
            pct_change=m.pct_change,
            min_effect=m.min_effect,
        )
        return (0 if m.series_id == alert.series_id else 1, *severity_rule.headline_order(effect))

    return [
        {
            "series": m.series,
            "label": metric_label(m.series.metric),
            "role": severity_rule.metric_role(m.series.metric),
            "severity": m.severity,
            "severity_label": Severity(m.severity).label,
            "pct_change": m.pct_change,
            "multiple": severity_rule.effect_multiple(pct_change=m.pct_change, min_effect=m.min_effect),
            "before_mean": m.before_mean,
            "after_mean": m.after_mean,
            "unit": m.series.unit,
            "headline": m.series_id == alert.series_id,
            "reverted": m.reverted_at_run is not None,
        }
        for m in sorted(members, key=order)
    ]


def alerts_other_metrics(*, alerts: list[Alert]) -> dict[int, list[str]]:
    """For each alert of a list page, the labels of the metrics its change moved besides the
    headline (one query for the page)."""
    headline = {a.pk: a.series_id for a in alerts}
    others: dict[int, list[str]] = {}
    rows = (
        AlertMetric.objects.filter(alert_id__in=list(headline))
        .order_by("alert_id", "id")
        .values_list("alert_id", "series_id", "series__metric")
    )
    for alert_id, series_id, metric in rows:
        if series_id != headline[alert_id]:
            others.setdefault(alert_id, []).append(metric_label(metric))
    return others
