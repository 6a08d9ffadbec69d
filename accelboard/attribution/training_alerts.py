"""A training job's step-time regressions, raised as alerts like any other.

``training_regression_check`` runs the benchmark detector (``alerts.detection.check_latest``,
lower is better) on the job's step time per interval between its progress points, and raises a
"training" alert when the newest intervals are a sustained slowdown (a lone slow interval, a
checkpoint, never alerts: the detector needs the shift to hold). One alert per job while one is
open or acknowledged; a change already alerted on is the baseline of later checks.
"""

from __future__ import annotations

from typing import Any

from accelboard.alerts import detection
from accelboard.alerts.choices import AlertKind, AlertState
from accelboard.alerts.models import Alert
from accelboard.alerts.services import alert_raise
from accelboard.fleet.models import GpuAttribution, Host, Workload

from . import training
from .training_selectors import training_points

# The detector wants a baseline of results; a job's intervals are its results.
MIN_INTERVALS = detection.DEFAULT_MIN_BASELINE + 2


def training_regression_check(*, workload: Workload, opened_at: Any = None) -> Alert | None:
    """Run the detector on the job's step time per interval; raise (or return the open) training
    alert when the newest intervals are a sustained slowdown; None otherwise. Safe to run twice:
    one alert per job while one is open or acknowledged, and a change already alerted on is the
    baseline of later checks."""
    points = training_points(workload=workload)
    intervals = training.intervals_build(points=points, holds=[], energy={})
    if len(intervals) < MIN_INTERVALS:
        return None
    open_alert = (
        Alert.objects.filter(
            kind=AlertKind.TRAINING,
            detail__workload_id=workload.pk,
            state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED],
        )
        .order_by("-opened_at")
        .first()
    )
    if open_alert is not None:
        return open_alert
    previous = (
        Alert.objects.filter(kind=AlertKind.TRAINING, detail__workload_id=workload.pk)
        .order_by("-opened_at")
        .first()
    )
    baseline = 0
    if previous is not None:
        change_at = str(previous.detail.get("change_at", ""))
        baseline = next((i for i, iv in enumerate(intervals) if iv.start.isoformat() >= change_at), 0)
    values = [iv.step_time_s for iv in intervals]
    verdict = detection.check_latest(values, direction="lower", baseline=baseline)
    if verdict.kind != detection.REGRESSION or verdict.change_index is None:
        return None
    change = intervals[verdict.change_index]
    host_id = GpuAttribution.objects.filter(workload_id=workload.pk).values_list("host_id", flat=True).first()
    alert, _ = alert_raise(
        team=workload.team,
        kind=AlertKind.TRAINING,
        dedupe_key=f"training:{workload.pk}:{change.start.isoformat()}"[:200],
        title=f"Step time of {workload} up {verdict.pct_change or 0:.0f}% since "
        f"{change.start:%Y-%m-%d %H:%M} UTC",
        host=Host.objects.filter(pk=host_id).first() if host_id else None,
        before_mean=verdict.level_before,
        before_spread=verdict.spread_before,
        after_mean=verdict.level_after,
        after_spread=verdict.spread_after,
        pct_change=verdict.pct_change,
        confidence=verdict.confidence,
        detail={
            "workload_id": workload.pk,
            "metric": "step_time_s",
            "unit": "s",
            "change_at": change.start.isoformat(),
            "step": points[verdict.change_index].step,
            "reason": verdict.reason,
        },
        opened_at=opened_at,
    )
    return alert
