"""The benchmark check: run the detector on a series after a run lands, and keep alerts in step.

1. ``run_check(run_id=...)`` checks every series the run has a result in (one ``series_check``
   each). It is what the Celery task calls after ``run_record`` commits.
2. ``series_check`` holds a Postgres advisory lock per series for its transaction, so two
   workers checking the same series queue up instead of racing; with the unique dedupe key this
   makes a re-check, or a second worker, a no-op.
3. Baseline: the detector sees the series since its latest marker: an expected change a person
   recorded, or the first bad run of an earlier change alert (an accepted change is the new
   level). An alert that reverted by itself is not a marker: its shifted results are hidden
   (NaN) so they neither form a baseline nor inflate the noise.
4. Revert: a metric of an open or acknowledged change alert whose two newest results since the
   raise are both nearer the old level than the new one has reverted; the detector resolves the
   alert (reason "reverted") once every metric it holds has. This covers the outlier flagged from
   its samples that went back and the later fix of a regression.
5. One alert per change: the metrics of one configuration (workload, hardware, count) that moved
   at the same first bad run, or one run beside it (a change point is good to about a run), are
   one alert, dedupe key
   ``bench:<kind>:<workload>:<accelerator>:<count>:<first bad run>``, with one ``AlertMetric``
   per metric; its headline is its worst metric. Severity is ``severity.severity_for``: effect
   size against the threshold and what the metric means to users (improvements are info alerts;
   they move the baseline too).
6. ``series_rescore`` re-segments a whole history offline (after a threshold change) and
   reports the change points the current settings see, without touching alerts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet

from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.importers.metrics import ACCURACY_PREFIX, metric_label

from . import detection
from . import severity as severity_rule
from .choices import AlertKind, AlertState
from .models import Alert, AlertMetric
from .selectors import expected_change_runs, min_effect_for_series
from .services import alert_metric_record, alert_raise, alert_resolve

_LOCK_NAMESPACE = 0x41_4C  # "AL": advisory locks of the alerts app, keyed by series id
# Runs whose repeated samples a per-run check reads: the detector's within-run estimate uses 40.
_SAMPLES_TAIL = 60


@dataclass
class SeriesCheck:
    """What one check did on one series (for logs, tests and the job record)."""

    series_id: int
    verdict: str
    reason: str
    raised: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)


@dataclass
class _History:
    run_ids: list[int]
    values: np.ndarray
    samples: list[list[float] | None]


def _lock_series(series_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, series_id])


def _history(series: Series, upto: BenchmarkRun | None, *, samples_tail: int | None = None) -> _History:
    """The series in run order up to ``upto``; repeated samples only for the last ``samples_tail``
    runs when given (the detector reads no older ones, and a long history's samples are heavy)."""
    points = MetricValue.objects.filter(series=series)
    if upto is not None:
        points = points.filter(measured_at__lte=upto.started_at)
    fields = ["run_id", "value", "measured_at"] + ([] if samples_tail is not None else ["samples"])
    rows = list(points.order_by("measured_at", "run_id").values_list(*fields))
    if upto is not None:
        # Same start time as the checked run but recorded later: not part of its history.
        rows = [r for r in rows if r[2] < upto.started_at or r[0] <= upto.pk]
    run_ids = [r[0] for r in rows]
    samples: list[list[Any] | None]
    if samples_tail is None:
        samples = [list(r[3]) if r[3] else None for r in rows]
    else:
        tail = run_ids[-samples_tail:]
        found = dict(
            MetricValue.objects.filter(series=series, run_id__in=tail).values_list("run_id", "samples")
        )
        samples = [None] * (len(run_ids) - len(tail))
        samples += [list(found[r]) if found.get(r) else None for r in tail]
    return _History(run_ids=run_ids, values=np.array([r[1] for r in rows], dtype=float), samples=samples)


def _change_alerts(series: Series) -> list[AlertMetric]:
    """This series' part in every change alert that holds it (with the alert, in opening order)."""
    return list(
        AlertMetric.objects.filter(
            series=series, alert__kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT]
        )
        .exclude(alert__first_run=None)
        .select_related("alert")
        .order_by("alert__opened_at", "alert_id")
    )


def _baseline(h: _History, expected: list[int], members: list[AlertMetric]) -> tuple[int, np.ndarray]:
    """Index where the baseline starts, and the values with reverted excursions hidden."""
    position: dict[int | None, int] = {run_id: i for i, run_id in enumerate(h.run_ids)}
    values = h.values.copy()
    markers = [position[r] for r in expected if r in position]
    for member in members:
        start = position.get(_first_run(member))
        if start is None:
            continue
        if member.reverted_at_run is not None:
            values[start : position.get(member.reverted_at_run, start)] = np.nan
        else:
            # Accepted, acknowledged, or even called a false alarm: the level did move there, and
            # re-testing the old baseline would only raise the same change again.
            markers.append(start)
    return (max(markers) if markers else 0), values


def _first_run(member: AlertMetric) -> int | None:
    """Where this metric's own change began: its alert's first bad run, or the run beside it
    where the detector placed this metric's change (``_joined``)."""
    return member.first_run or member.alert.first_run_id


def _joined(series: Series, kind: str, h: _History, change_index: int) -> Alert | None:
    """The open change alert of this configuration whose first bad run is this change's, or
    the run just before or after it in the series.

    Change points carry an uncertainty of about a run: one commit that moves latency and
    throughput can be placed at run 20 for one and run 21 for the other by the noise. That is
    one change, so one alert (one email), not two."""
    exact = Alert.objects.filter(dedupe_key=_change_key(series, kind, h.run_ids[change_index])).first()
    if exact is not None:
        return exact
    beside = [
        _change_key(series, kind, h.run_ids[i])
        for i in (change_index - 1, change_index + 1)
        if 0 <= i < len(h.run_ids)
    ]
    return (
        Alert.objects.filter(dedupe_key__in=beside, state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED])
        .order_by("opened_at", "pk")
        .first()
    )


def _watched(member: AlertMetric) -> bool:
    """Is this metric of an alert still watched for a revert? While the alert is open or
    acknowledged, and after the detector resolved it (its other metrics may come back later)."""
    if member.reverted_at_run is not None:
        return False
    alert = member.alert
    return alert.state in (AlertState.OPEN, AlertState.ACKNOWLEDGED) or (
        alert.state == AlertState.RESOLVED and alert.detail.get("reverted_at_run") is not None
    )


def _revert_check(h: _History, member: AlertMetric) -> int | None:
    """Run id where the values went back to the old level, if the two newest results say so."""
    position: dict[int | None, int] = {run_id: i for i, run_id in enumerate(h.run_ids)}
    start = position.get(_first_run(member))
    raised_at = position.get(member.checked_run)
    if start is None or raised_at is None or member.before_mean is None or member.after_mean is None:
        return None
    later = [i for i in range(raised_at + 1, len(h.values)) if math.isfinite(h.values[i])]
    if len(later) < 2:
        return None
    newest = later[-2:]
    if all(abs(h.values[i] - member.before_mean) < abs(h.values[i] - member.after_mean) for i in newest):
        # The revert began at the first of the run of results back near the old level.
        first = newest[0]
        for i in reversed(later[:-2]):
            if abs(h.values[i] - member.before_mean) < abs(h.values[i] - member.after_mean):
                first = i
            else:
                break
        return h.run_ids[first]
    return None


def _revert(member: AlertMetric, run_id: int) -> bool:
    """Record that this metric went back; resolve the alert once all its metrics have. True if
    this resolved the alert."""
    AlertMetric.objects.filter(pk=member.pk).update(reverted_at_run=run_id)
    member.reverted_at_run = run_id
    alert = member.alert
    if alert.state not in (AlertState.OPEN, AlertState.ACKNOWLEDGED):
        return False
    if AlertMetric.objects.filter(alert=alert, reverted_at_run=None).exists():
        return False
    detail = {**alert.detail, "reverted_at_run": run_id}
    Alert.objects.filter(pk=alert.pk).update(detail=detail)
    alert.detail = detail
    alert_resolve(alert=alert, reason="reverted", note="the values went back to the old level")
    return True


def _is_return(member: AlertMetric, verdict: detection.Verdict) -> bool:
    """Is ``verdict`` the way back of an open change alert (its new level nearer the old one)?"""
    if member.alert.state not in (AlertState.OPEN, AlertState.ACKNOWLEDGED) or verdict.level_after is None:
        return False
    if member.before_mean is None or member.after_mean is None:
        return False
    return abs(verdict.level_after - member.before_mean) < abs(verdict.level_after - member.after_mean)


def _title(member: AlertMetric, others: int) -> str:
    """ "Output tokens per second regressed -12.0% (and 2 more metrics) · workload · H100"."""
    series = member.series
    word = "regressed" if member.alert.kind == AlertKind.REGRESSION else "improved"
    pct = member.pct_change if member.pct_change is not None else math.nan
    more = f" (and {others} more metric{'s' if others != 1 else ''})" if others else ""
    return (
        f"{metric_label(series.metric)} {word} {pct:+.1f}%{more} · {series.workload} · "
        f"{series.accelerator_type or 'any'}"
    )


def _change_key(series: Series, kind: str, first_run_id: int) -> str:
    """The identity of one change: every metric of the configuration that moved at that run."""
    return (
        f"bench:{kind}:{series.workload_id}:{series.accelerator_type_id or '-'}:"
        f"{series.accelerator_count}:{first_run_id}"
    )


@transaction.atomic
def series_check(*, series: Series, upto: BenchmarkRun | None = None) -> SeriesCheck:
    """Check one series at ``upto`` (default: its newest run); raise or resolve alerts."""
    _lock_series(series.pk)
    h = _history(series, upto, samples_tail=_SAMPLES_TAIL)
    return _check_at(
        series,
        h,
        alerts=_change_alerts(series),
        expected=expected_change_runs(series=series),
        min_effect=min_effect_for_series(series=series),
    )


@transaction.atomic
def series_history_check(*, series: Series) -> list[SeriesCheck]:
    """Replay the whole history as if each run had just landed (loaded or imported data).

    The same steps as ``series_check`` at every run, with the history read once: what the
    per-run task would have raised and resolved, had it seen the runs arrive one by one.
    """
    _lock_series(series.pk)
    h = _history(series, None)
    alerts = _change_alerts(series)
    expected = expected_change_runs(series=series)
    min_effect = min_effect_for_series(series=series)
    # An alert raised in the replay is dated by the run that revealed it, not by the replay.
    run_times = dict(BenchmarkRun.objects.filter(pk__in=h.run_ids).values_list("pk", "started_at"))
    out = []
    for n in range(detection.DEFAULT_MIN_BASELINE // 2, len(h.run_ids) + 1):
        prefix = _History(h.run_ids[:n], h.values[:n], h.samples[:n])
        out.append(
            _check_at(
                series,
                prefix,
                alerts=alerts,
                expected=expected,
                min_effect=min_effect,
                opened_at=run_times.get(prefix.run_ids[-1]) if prefix.run_ids else None,
            )
        )
    return out


def _check_at(
    series: Series,
    h: _History,
    *,
    alerts: list[AlertMetric],
    expected: list[int],
    min_effect: float,
    opened_at: datetime | None = None,
) -> SeriesCheck:
    """One check at the end of ``h``; ``alerts`` (the series' part in its change alerts) is kept
    current."""
    result = SeriesCheck(series_id=series.pk, verdict=detection.NONE, reason="no results")
    if not h.run_ids:
        return result
    checked_run = h.run_ids[-1]
    for member in alerts:
        if _watched(member):
            reverted_at = _revert_check(h, member)
            if reverted_at is not None and _revert(member, reverted_at):
                result.resolved.append(member.alert_id)
    baseline, values = _baseline(h, expected, alerts)
    has_samples = any(s for s in h.samples)
    verdict = detection.check_latest(
        values,
        direction=series.direction,
        samples=h.samples if has_samples else None,
        min_effect=min_effect,
        baseline=baseline,
    )
    result.verdict, result.reason = verdict.kind, verdict.reason
    if verdict.kind == detection.NONE or verdict.change_index is None:
        return result
    returning = next((a for a in alerts if _is_return(a, verdict)), None)
    if returning is not None:
        # Back towards the level before an open alert: a revert in the making (resolved once two
        # results confirm it), not a new change in the other direction.
        result.verdict, result.reason = (
            detection.NONE,
            f"returning to the level before alert #{returning.alert_id}",
        )
        return result
    first_run_id = h.run_ids[verdict.change_index]
    good = [i for i in range(verdict.change_index) if math.isfinite(values[i])]
    last_good_id = h.run_ids[good[-1]] if good else None
    runs = BenchmarkRun.objects.in_bulk([r for r in (first_run_id, last_good_id) if r is not None])
    first_run, last_good = runs[first_run_id], runs.get(last_good_id) if last_good_id else None
    regression = verdict.kind == detection.REGRESSION
    kind = AlertKind.REGRESSION if regression else AlertKind.IMPROVEMENT
    severity = severity_rule.severity_for(
        regression=regression, metric=series.metric, pct_change=verdict.pct_change, min_effect=min_effect
    )
    evidence = {
        "before_mean": verdict.level_before,
        "before_spread": verdict.spread_before,
        "after_mean": verdict.level_after,
        "after_spread": verdict.spread_after,
        "pct_change": verdict.pct_change,
        "confidence": verdict.confidence,
    }
    detail = _detail(
        series, verdict, checked_run, first_run, last_good, min_effect, _change_runs(series, h, min_effect)
    )
    key = _change_key(series, kind, first_run_id)
    # Another metric of the same change opened it already (at this run or one beside it): this
    # one joins it (the headline's evidence and detail stay the headline's).
    alert = _joined(series, kind, h, verdict.change_index)
    created = False
    if alert is None:
        alert, created = alert_raise(
            team=series.team,
            kind=kind,
            severity=severity,
            dedupe_key=key,
            title=f"{metric_label(series.metric)} · {series.workload}",  # named by its headline below
            series=series,
            first_run=first_run,
            last_good_run=last_good,
            min_effect=min_effect,
            detail=detail,
            opened_at=opened_at,
            **evidence,
        )
    member = alert_metric_record(
        alert=alert,
        series=series,
        severity=severity,
        evidence=evidence,
        min_effect=min_effect,
        checked_run=checked_run,
        title=_title,
        detail=detail,
        first_run=first_run_id if first_run_id != alert.first_run_id else None,
    )
    if created:
        result.raised.append(alert.pk)
    if member.alert_id == alert.pk and all(m.pk != member.pk for m in alerts):
        member.alert = alert
        alerts.append(member)
    return result


def _change_runs(series: Series, h: _History, min_effect: float) -> list[int]:
    """Runs where the whole history so far changed level (the offline segmentation): the alert
    page marks them on its chart from the alert, without running the detector again."""
    points = detection.segment(h.values, direction=series.direction, min_effect=min_effect)
    return [h.run_ids[cp.index] for cp in points if 0 <= cp.index < len(h.run_ids)]


def _detail(
    series: Series,
    verdict: detection.Verdict,
    checked_run: int,
    first_run: BenchmarkRun,
    last_good: BenchmarkRun | None,
    min_effect: float,
    change_runs: list[int],
) -> dict[str, Any]:
    return {
        "metric": series.metric,
        "unit": series.unit,
        "direction": series.direction,
        "reason": verdict.reason,
        "results_after": verdict.results_after,
        "checked_run": checked_run,
        "min_effect": min_effect,
        "commit_range": [last_good.git_commit if last_good else "", first_run.git_commit],
        "change_runs": change_runs,
    }


def _regression_checked(series: QuerySet[Series]) -> QuerySet[Series]:
    """The series this detector watches. The accuracy of a quantized variant is judged against its
    reference variant by the drift check (``accelboard.drift``, alerts of kind drift): checking it
    here as well would raise two alerts for one change."""
    return series.exclude(
        (Q(metric="accuracy") | Q(metric__startswith=ACCURACY_PREFIX))
        & Q(workload__variant__model__reference_variant__isnull=False)
        & ~Q(workload__variant_id=F("workload__variant__model__reference_variant_id"))
    )


def alerts_history_check(*, series_ids: list[int] | None = None) -> dict[str, int]:
    """Replay every series (or the given ones): the alerts pass after a bulk load such as the demo."""
    series_list = _regression_checked(
        Series.objects.select_related("team", "workload__variant__model", "accelerator_type")
    )
    if series_ids is not None:
        series_list = series_list.filter(pk__in=series_ids)
    raised = resolved = 0
    for series in series_list.order_by("pk"):
        for check in series_history_check(series=series):
            raised += len(check.raised)
            resolved += len(check.resolved)
    return {"alerts_raised": raised, "alerts_resolved": resolved}


def run_check(*, run_id: int) -> list[SeriesCheck]:
    """Check every series the run has a result in. A missing run (deleted since) checks nothing."""
    run = BenchmarkRun.objects.filter(pk=run_id).first()
    if run is None:
        return []
    series_list = _regression_checked(Series.objects.filter(points__run=run)).select_related(
        "team", "workload__variant__model", "accelerator_type"
    )
    return [series_check(series=s, upto=run) for s in series_list]


def series_rescore(*, series: Series, min_effect: float | None = None) -> list[detection.ChangePoint]:
    """Offline segmentation of the whole history with the thresholds in force (or ``min_effect``)."""
    values = (
        MetricValue.objects.filter(series=series)
        .order_by("measured_at", "run_id")
        .values_list("value", flat=True)
    )
    effect = min_effect if min_effect is not None else min_effect_for_series(series=series)
    return detection.segment(
        np.array(list(values), dtype=float), direction=series.direction, min_effect=effect
    )
