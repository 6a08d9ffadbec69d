"""Reads for benchmark runs and series."""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from accelboard.alerts.choices import DismissReason
from accelboard.alerts.models import Alert

from .models import BenchmarkRun, MetricValue

# --- A run against its series' baselines --------------------------------------------------------

# The baseline shown is the median of this many recent results; the detector reads further back
# (up to its own cap) to estimate the series' noise.
BASELINE_POINTS = 20
HISTORY_POINTS = 200
# No detector verdict: the series has no earlier result to compare with.
VERDICT_NEW = "new"


def _baseline_resets(*, series_ids: list[int], before: datetime) -> dict[int, datetime]:
    """Per series, when its current baseline starts: the last change a person marked expected.

    DESIGN.md (Regressions): marking a change expected resets the baseline, so results before the
    change's first run no longer count."""
    resets: dict[int, datetime] = {}
    alerts = (
        Alert.objects.filter(
            series_id__in=series_ids,
            dismissed_reason=DismissReason.EXPECTED,
            first_run__isnull=False,
            first_run__started_at__lte=before,
        )
        .order_by("series_id", "-first_run__started_at")
        .values_list("series_id", "first_run__started_at")
    )
    for series_id, started_at in alerts:
        resets.setdefault(series_id, started_at)
    return resets


def run_baseline_compare(*, run: BenchmarkRun) -> list[dict[str, Any]]:
    """Each metric of ``run`` against its series: baseline, delta % and the detector's verdict.

    1. History: the series' valid results before this run (by time, then by run id for results at
       the same instant), since the last expected-change mark, newest ``HISTORY_POINTS``.
    2. Baseline: the median of the newest ``BASELINE_POINTS`` of them; delta % = (value - baseline)
       / |baseline| x 100 (None with no history or a zero baseline).
    3. Verdict: ``alerts.detection.check_latest`` on history + this value, with the runs' repeated
       samples and the series' own minimum effect; ``"new"`` when there is no history.
    Two queries whatever the number of metrics (metrics, then all histories in one window query).
    """
    from accelboard.alerts.detection import DEFAULT_MIN_EFFECT, check_latest

    values = list(run.metrics.select_related("series").order_by("name"))
    series_ids = [value.series_id for value in values]
    resets = _baseline_resets(series_ids=series_ids, before=run.started_at)
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
        .values_list("series_id", "value", "samples", "measured_at", "newest")
    )
    history: dict[int, list[tuple[int, float, list[float]]]] = {}
    for series_id, value, samples, measured_at, newest in rows:
        reset = resets.get(series_id)
        if reset is not None and measured_at < reset:
            continue
        history.setdefault(series_id, []).append((newest, value, samples or []))
    result = []
    for metric in values:
        points = sorted(history.get(metric.series_id, []), key=lambda item: -item[0])  # oldest first
        past = [value for _, value, _ in points]
        recent = past[-BASELINE_POINTS:]
        baseline = float(statistics.median(recent)) if recent else None
        delta_pct = (metric.value - baseline) / abs(baseline) * 100 if baseline else None
        entry: dict[str, Any] = {
            "name": metric.name,
            "value": metric.value,
            "unit": metric.unit,
            "direction": metric.direction,
            "series_id": metric.series_id,
            "baseline": baseline,
            "baseline_points": len(recent),
            "delta_pct": delta_pct,
            "verdict": VERDICT_NEW,
            "confidence": None,
            "pct_change": None,
            "reason": "first result of this series" if not past else "",
        }
        if past:
            samples = [list(s) or None for _, _, s in points] + [list(metric.samples) or None]
            has_samples = any(s is not None for s in samples)
            verdict = check_latest(
                [*past, metric.value],
                direction=metric.direction,
                samples=samples if has_samples else None,
                min_effect=metric.series.min_effect
                if metric.series.min_effect is not None
                else DEFAULT_MIN_EFFECT,
            )
            entry.update(
                verdict=verdict.kind,
                confidence=verdict.confidence,
                pct_change=verdict.pct_change,
                reason=verdict.reason,
            )
        result.append(entry)
    return result
