"""Reads for the trends page: which series a caller may chart, their points, alerts and annotations.

A fixed handful of queries whatever the number of series drawn (at most ``MAX_SERIES``): one for
the pickers' choices, one for the series, one for all their points, one for their alerts, one for
expected-change annotations.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform

from accelboard.alerts.choices import DismissReason
from accelboard.alerts.models import Alert, DetectionSetting, ExpectedChange
from accelboard.benchmarks.filters import SeriesFilterSet
from accelboard.benchmarks.models import MetricValue, Series
from accelboard.core.access import Scope
from accelboard.importers.metrics import metric_spec

# Beyond a handful of lines a chart stops being readable; the URL is also the share link.
MAX_SERIES = 8
# Points per series drawn (the newest); the range slider handles zoom within them.
MAX_POINTS = 2000


@dataclass
class Filters:
    """What the pickers selected; empty strings mean "any"."""

    model: str = ""
    variant: str = ""
    hardware: str = ""
    metric: str = ""

    def any(self) -> bool:
        return bool(self.model or self.variant or self.hardware or self.metric)


@dataclass
class SeriesHistory:
    """One series with everything the chart marks on it, oldest point first."""

    series: Series
    label: str
    unit: str
    direction: str
    min_effect: float | None
    times: list[datetime] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    expected: list[dict[str, Any]] = field(default_factory=list)


def series_label(*, series: Series) -> str:
    """``Llama-3.1-8B bf16 · p99 latency · 1× H100 SXM 80GB``: what a legend needs to tell lines apart."""
    variant = series.workload.variant
    spec = metric_spec(series.metric)
    metric = f"{spec.label} ({series.unit})" if spec else f"{series.metric} ({series.unit})"
    hardware = f"{series.accelerator_count}× {series.accelerator_type.name if series.accelerator_type else 'unknown'}"
    return f"{variant.model.name} {variant.name} · {metric} · {hardware}"


def trend_choices(*, scope: Scope) -> dict[str, list[tuple[str, str]]]:
    """The pickers' options (value, label) from the series the caller may see. One query."""
    rows = Series.objects.visible_to(scope).values_list(
        "workload__variant__model__name",
        "workload__variant__name",
        "accelerator_type__slug",
        "accelerator_type__name",
        "metric",
    )
    models, variants, hardware, metrics = set(), set(), set(), set()
    for model, variant, slug, type_name, metric in rows.distinct():
        models.add((model, model))
        variants.add((variant, variant))
        if slug:
            hardware.add((slug, type_name))
        spec = metric_spec(metric)
        metrics.add((metric, f"{spec.label} ({spec.unit})" if spec else metric))
    return {
        "model": sorted(models),
        "variant": sorted(variants),
        "hardware": sorted(hardware, key=lambda item: item[1]),
        "metric": sorted(metrics, key=lambda item: item[1]),
    }


def filters_of_series(*, histories: list[SeriesHistory]) -> Filters:
    """The pickers as the open series fill them: each picker shows the value every open series
    shares (one model, one metric...), and "Any" where they differ. No query (the histories'
    series carry their workload, variant and type)."""

    def shared(values: list[str]) -> str:
        return values[0] if values and all(v == values[0] for v in values) else ""

    series = [h.series for h in histories]
    return Filters(
        model=shared([s.workload.variant.model.name for s in series]),
        variant=shared([s.workload.variant.name for s in series]),
        hardware=shared([s.accelerator_type.slug if s.accelerator_type else "" for s in series]),
        metric=shared([s.metric for s in series]),
    )


def series_find(*, scope: Scope, filters: Filters) -> tuple[list[int], int]:
    """Ids of visible series matching the filters (at most ``MAX_SERIES``) and how many matched."""
    series = SeriesFilterSet(asdict(filters), queryset=Series.objects.visible_to(scope)).qs
    ids = list(series.order_by("-last_run_at", "pk").values_list("pk", flat=True)[: MAX_SERIES + 1])
    return ids[:MAX_SERIES], len(ids)


def series_histories(*, series_ids: list[int], scope: Scope) -> list[SeriesHistory]:
    """The requested series in the requested order, with points, alerts and expected changes.

    Raises ``Series.DoesNotExist`` if any id is not a series the user may see: a shared link to
    another team's series reveals nothing, not even which of its ids exist.
    """
    if not series_ids:
        return []
    found = {
        s.pk: s
        for s in Series.objects.visible_to(scope)
        .filter(pk__in=series_ids)
        .select_related("workload__variant__model", "accelerator_type")
    }
    missing = [pk for pk in series_ids if pk not in found]
    if missing:
        raise Series.DoesNotExist(f"series {missing[0]} is not one you may see")
    histories = {
        pk: SeriesHistory(
            series=found[pk],
            label=series_label(series=found[pk]),
            unit=found[pk].unit,
            direction=found[pk].direction,
            min_effect=found[pk].min_effect,
        )
        for pk in series_ids
    }

    points = (
        MetricValue.objects.filter(series_id__in=series_ids)
        .order_by("series_id", "-measured_at")
        .values_list("series_id", "measured_at", "value", "run_id", "run__git_commit")
    )
    per_series: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in points:
        if len(per_series[row[0]]) < MAX_POINTS:
            per_series[row[0]].append(row)
    for pk, rows in per_series.items():
        history = histories[pk]
        for _, measured_at, value, run_id, commit in reversed(rows):
            history.times.append(measured_at)
            history.values.append(value)
            history.run_ids.append(run_id)
            history.commits.append(commit or "")

    # One change is one alert: a grouped alert is drawn on each of its series, with that series'
    # own change (one row per alert and metric it holds; none for an alert without metrics).
    alerts = Alert.objects.filter(Q(series_id__in=series_ids) | Q(metrics__series_id__in=series_ids)).values(
        "id",
        "series_id",
        "title",
        "severity",
        "state",
        "kind",
        "opened_at",
        "pct_change",
        "dismissed_reason",
        "first_run_id",
        "first_run__started_at",
        "metrics__series_id",
        "metrics__pct_change",
        "metrics__reverted_at_run",
        reverted_at_run=KeyTextTransform("reverted_at_run", "detail"),
    )
    drawn: set[tuple[int, int]] = set()
    for alert_row in alerts.order_by("opened_at", "id"):
        # A change a person marked expected shows as its ExpectedChange annotation, not as an alert.
        if alert_row["dismissed_reason"] == DismissReason.EXPECTED:
            continue
        alert: dict[str, Any] = {k: v for k, v in alert_row.items() if not k.startswith("metrics__")}
        reverted = str(alert_row["reverted_at_run"] or "")
        alert["reverted_at_run"] = int(reverted) if reverted.isdigit() else None
        if alert_row["metrics__series_id"] is not None:
            # This series' own change and its own way back (one metric of a change may revert
            # before the others).
            alert.update(
                series_id=alert_row["metrics__series_id"],
                pct_change=alert_row["metrics__pct_change"],
                reverted_at_run=alert_row["metrics__reverted_at_run"],
            )
        key = (alert["id"], alert["series_id"])
        if alert["series_id"] in histories and key not in drawn:
            drawn.add(key)
            histories[alert["series_id"]].alerts.append(alert)

    changes = (
        ExpectedChange.objects.filter(series_id__in=series_ids)
        .order_by("run__started_at")
        .values("series_id", "run_id", "run__started_at", "note")
    )
    for change in changes:
        histories[change["series_id"]].expected.append(
            {
                "at": change["run__started_at"],
                "run_id": change["run_id"],
                "note": change["note"] or "Expected change",
            }
        )

    # The detector's thresholds, as the alerts use them (``alerts.selectors.min_effect_for_series``),
    # read for every series at once: series override, team's metric setting, team default.
    settings = {
        (team_id, metric): effect
        for team_id, metric, effect in DetectionSetting.objects.filter(
            team_id__in={h.series.team_id for h in histories.values()},
            metric__in=[*{h.series.metric for h in histories.values()}, ""],
        ).values_list("team_id", "metric", "min_effect")
    }
    for history in histories.values():
        one = history.series
        if one.min_effect is None:
            history.min_effect = settings.get((one.team_id, one.metric), settings.get((one.team_id, "")))
    for history in histories.values():
        history.expected.sort(key=lambda item: item["at"])
    return [histories[pk] for pk in series_ids]
