"""Reads for the page of a production alert: the rows around its signal, turned into a figure
by ``signal_charts``. Each read is bounded (a window around the alert's start, one variant's
results), so the page costs the same whatever the size of the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from accelboard.fleet.choices import RollupWidth
from accelboard.fleet.models import Accelerator, TelemetryRollup
from accelboard.serving.models import InferenceMetric

from . import signal_charts
from .choices import AlertKind
from .models import Alert
from .production_services import interval_energy, slowdown_minutes

BEFORE = timedelta(hours=6)
AFTER = timedelta(hours=2)
GPU_BEFORE = timedelta(hours=1)

# kind -> (label, unit) of the figure a production alert is about
_SIGNALS: dict[str, tuple[str, str]] = {
    AlertKind.SLO: ("p99 end-to-end latency", "ms"),
    AlertKind.THROUGHPUT: ("decode speed per stream", "tokens/s"),
    AlertKind.ENERGY: ("energy per generated token", "J/token"),
    AlertKind.MEMORY: ("memory in use", "%"),
    AlertKind.THROTTLE: ("samples slowed by heat or hardware", "%"),
    AlertKind.HARDWARE: ("error counter", "errors"),
}


@dataclass
class SignalView:
    """What the alert page shows for a production or drift alert."""

    figure: dict[str, Any] | None
    note: str
    evidence: list[tuple[str, str]]
    history: list[tuple[str, str, str]] = field(default_factory=list)


def alert_signal_view(*, alert: Alert) -> SignalView | None:
    """The chart and readable evidence of a production alert; None for other kinds (a drift
    alert's view is ``drift.alert_selectors.drift_alert_signal``: drift builds on alerts)."""
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    if alert.kind in _SIGNALS:
        label, unit = _SIGNALS[alert.kind]
        figure, note = _production(alert, detail, label, unit)
        return SignalView(figure=figure, note=note, evidence=signal_charts.evidence_rows(detail))
    return None


def _since(alert: Alert, detail: dict[str, Any]) -> datetime:
    try:
        return datetime.fromisoformat(str(detail["since"]))
    except (KeyError, ValueError):
        return alert.opened_at


def _production(
    alert: Alert, detail: dict[str, Any], label: str, unit: str
) -> tuple[dict[str, Any] | None, str]:
    entity = str(detail.get("entity", ""))
    since = _since(alert, detail)
    points: list[tuple[datetime, float]] = []
    limit = detail.get("threshold") if isinstance(detail.get("threshold"), int | float) else None
    reference = None
    if entity.startswith("serving:"):
        _, host_id, variant_id = entity.split(":")
        rows = list(
            InferenceMetric.objects.filter(
                host_id=int(host_id),
                variant_id=int(variant_id),
                interval_start__gte=since - BEFORE,
                interval_start__lt=since + AFTER,
            ).order_by("interval_start")
        )
        if alert.kind == AlertKind.SLO:
            points = [(r.interval_start, r.e2e_p99_ms) for r in rows if r.e2e_p99_ms is not None]
        elif alert.kind == AlertKind.THROUGHPUT:
            points = [(r.interval_start, 1000.0 / r.itl_p50_ms) for r in rows if r.itl_p50_ms]
            reference = detail.get("reference_tokens_per_s")
            limit = None  # the limit is relative to the load-matched reference, drawn instead
        elif alert.kind == AlertKind.ENERGY:
            points = _energy_points(rows)
            reference = detail.get("reference_j_per_token")
            limit = None
    elif entity.startswith("gpu:"):
        points = _gpu_points(alert.kind, int(entity.split(":")[1]), since)
        if alert.kind == AlertKind.MEMORY:
            limit = 95.0
        elif alert.kind == AlertKind.THROTTLE:
            limit = 50.0
        else:
            limit = None
    if len(points) < 2:
        return None, "Too few data points around this alert to draw its signal."
    figure = signal_charts.signal_figure(
        points=points,
        label=label,
        unit=unit,
        since=since,
        limit=limit,
        reference=reference if isinstance(reference, int | float) else None,
    )
    note = (
        f"{label.capitalize()} from {(since - (GPU_BEFORE if entity.startswith('gpu:') else BEFORE)):%Y-%m-%d %H:%M} "
        "UTC. Red line: when the condition started; dashed: the limit (orange) or what the reference "
        "window ran at the same load (green)."
    )
    return figure, note


def _energy_points(rows: list[InferenceMetric]) -> list[tuple[datetime, float]]:
    if not rows:
        return []
    uuids = sorted({u for r in rows for u in r.accelerator_uuids})
    ids = list(Accelerator.objects.filter(uuid__in=uuids).values_list("id", flat=True))
    if not ids:
        return []
    end = rows[-1].interval_start + timedelta(seconds=rows[-1].interval_s)
    rollups = list(
        TelemetryRollup.objects.filter(
            width_s=RollupWidth.MINUTE,
            accelerator_id__in=ids,
            bucket__gte=rows[0].interval_start,
            bucket__lt=end,
        ).values_list("accelerator_id", "bucket", "energy_j")
    )
    energy = interval_energy(rollups, [(r.interval_start, r.interval_s) for r in rows], len(ids))
    return [
        (r.interval_start, e / r.generated_tokens)
        for r, e in zip(rows, energy, strict=True)
        if e and r.generated_tokens
    ]


def _gpu_points(kind: str, gpu_id: int, since: datetime) -> list[tuple[datetime, float]]:
    rows = TelemetryRollup.objects.filter(
        width_s=RollupWidth.MINUTE,
        accelerator_id=gpu_id,
        bucket__gte=since - GPU_BEFORE,
        bucket__lt=since + AFTER,
    ).order_by("bucket")
    if kind == AlertKind.MEMORY:
        return [
            (b, used / total * 100)
            for b, used, total in rows.values_list("bucket", "mem_used_avg_bytes", "mem_total_bytes")
            if used is not None and total
        ]
    if kind == AlertKind.THROTTLE:
        # The rule's own reading (faults only, not the power cap), from raw samples.
        minutes = slowdown_minutes(start=since - GPU_BEFORE, end=since + AFTER, gpu_id=gpu_id).get(gpu_id, {})
        return [(minute, slowed / samples * 100) for minute, (slowed, samples) in minutes.items() if samples]
    return [
        (b, float((ecc or 0) + (xid or 0)))
        for b, ecc, xid in rows.values_list("bucket", "ecc_errors_max", "xid_errors_max")
        if ecc is not None or xid is not None
    ]
