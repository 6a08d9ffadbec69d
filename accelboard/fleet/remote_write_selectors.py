"""Reads about Prometheus remote-write: the pipeline status's line on unmapped metrics."""

from __future__ import annotations

from django.db.models import Sum

from accelboard.core.pipeline_selectors import Check

from .models import PrometheusUnknownMetric


def remote_write_checks() -> list[Check]:
    """The fleet's second probe: samples of metrics remote-written but not mapped, with the top
    names. Informative, never lagging: an unknown metric is not a fault."""
    total = PrometheusUnknownMetric.objects.aggregate(total=Sum("samples"))["total"] or 0
    top = dict(
        PrometheusUnknownMetric.objects.order_by("-samples", "name").values_list("name", "samples")[:10]
    )
    return [
        Check(
            name="prometheus.unknown_samples",
            value=float(total),
            limit=None,
            unit="samples",
            detail={"top": top or None},
        )
    ]
