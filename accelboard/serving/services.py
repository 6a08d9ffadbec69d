"""Writes for serving metrics: intervals of production traffic per model variant and host.

An interval is keyed by (host, variant, interval_start): a later batch carrying the same interval
(an exporter that re-sends a corrected minute) replaces it rather than adding a twin.
``inference_batch_store`` is the write behind ``POST /api/v1/inference-metrics`` (the API claims
the batch id around it, so a retried batch is stored once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from accelboard.benchmarks.choices import Precision
from accelboard.benchmarks.models import ModelVariant
from accelboard.benchmarks.selectors import model_variant_resolve
from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.core.models import Team
from accelboard.fleet.host_services import host_register
from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.fleet.models import Accelerator, Host

from .models import InferenceMetric


@dataclass(frozen=True)
class IntervalInput:
    model: str
    variant: str
    interval_start: datetime
    interval_s: int
    engine: str = "vllm"
    accelerator_uuids: list[str] = field(default_factory=list)
    requests: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    ttft_ms: dict[str, float | None] | None = None
    itl_ms: dict[str, float | None] | None = None
    e2e_ms: dict[str, float | None] | None = None
    queue_ms: dict[str, float | None] | None = None
    histograms: dict[str, Any] = field(default_factory=dict)
    latency_sums: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def variant_precision_guess(name: str) -> str | None:
    """The precision a variant's name states ("fp8-dynamic" -> fp8, "int4-awq" -> int4), if any."""
    for token in re.split(r"[^a-z0-9]+", name.lower()):
        if token in Precision.values:
            return token
    return None


def _variant(
    *, team: Team, model: str, variant: str, path: str, cache: dict[tuple[str, str], ModelVariant]
) -> ModelVariant:
    """The variant as the team sees it (its own or a shared one); another team's is never used,
    so its names answer as names nobody uses."""
    key = (model, variant)
    if key in cache:
        return cache[key]
    found = model_variant_resolve(team=team, model=model, variant=variant)
    if found is None:
        precision = variant_precision_guess(variant)
        if precision is None:
            raise IngestRejected(
                f"variant {variant!r} of {model!r} is not registered and its name states no precision "
                f"({', '.join(Precision.values)}); record a benchmark run for it first",
                path=path,
                code="unknown_variant",
            )
        found = model_variant_get_or_create(model=model, variant=variant, precision=precision, team=team)
    cache[key] = found
    return found


def _percentile(values: dict[str, float | None] | None, key: str) -> float | None:
    return None if values is None else values.get(key)


def inference_metrics_store(*, team: Team, host: Host, batch_id: str, intervals: list[IntervalInput]) -> int:
    """Upsert the intervals of one batch for one of the team's hosts; return how many were stored."""
    seen: set[tuple[str, str, datetime]] = set()
    variants: dict[tuple[str, str], ModelVariant] = {}
    rows = []
    for i, item in enumerate(intervals):
        key = (item.model, item.variant, item.interval_start)
        if key in seen:
            raise IngestRejected(
                "this model, variant and interval_start appear twice in the batch",
                path=f"intervals[{i}].interval_start",
                code="duplicate",
            )
        seen.add(key)
        variant = _variant(
            team=team, model=item.model, variant=item.variant, path=f"intervals[{i}].variant", cache=variants
        )
        rows.append(
            InferenceMetric(
                team=team,
                host=host,
                variant=variant,
                engine=item.engine,
                accelerator_uuids=list(item.accelerator_uuids),
                interval_start=item.interval_start,
                interval_s=item.interval_s,
                requests=item.requests,
                errors=item.errors,
                prompt_tokens=item.prompt_tokens,
                generated_tokens=item.generated_tokens,
                ttft_p50_ms=_percentile(item.ttft_ms, "p50"),
                ttft_p99_ms=_percentile(item.ttft_ms, "p99"),
                itl_p50_ms=_percentile(item.itl_ms, "p50"),
                itl_p99_ms=_percentile(item.itl_ms, "p99"),
                e2e_p50_ms=_percentile(item.e2e_ms, "p50"),
                e2e_p99_ms=_percentile(item.e2e_ms, "p99"),
                queue_p50_ms=_percentile(item.queue_ms, "p50"),
                queue_p99_ms=_percentile(item.queue_ms, "p99"),
                histograms=item.histograms,
                latency_sums=item.latency_sums,
                labels=item.labels,
                batch_id=batch_id,
            )
        )
    if not rows:
        return 0
    update = [
        "engine", "accelerator_uuids", "interval_s", "requests", "errors", "prompt_tokens",
        "generated_tokens", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms",
        "e2e_p99_ms", "queue_p50_ms", "queue_p99_ms", "histograms", "latency_sums", "labels", "batch_id",
    ]  # fmt: skip
    InferenceMetric.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["host", "variant", "interval_start"],
        update_fields=update,
    )
    return len(rows)


def _gpus_elsewhere(*, team: Team, uuids: list[str]) -> set[str]:
    """Those of ``uuids`` registered on a host this team does not own."""
    return set(
        Accelerator.objects.filter(uuid__in=uuids)
        .exclude(host__team=team)
        .exclude(host__team__isnull=True)  # an unclaimed host's GPUs are no one's yet
        .values_list("uuid", flat=True)
    )


def inference_batch_store(*, team: Team, payload: dict[str, Any]) -> dict[str, Any]:
    """Store one batch of serving-metric intervals (the API's ``InferenceBatchIn``, validated).

    The batch's host is the token's team's host of that name, registered for the team when it has
    none yet (its agent's telemetry, sent with a token of the same team, then fills it in). Another
    team's host of the same name is never used nor looked at: the rows, and the PUE and prices
    their costs are worked out with, are the sender's, and the answer is the one a name nobody
    uses gets. A GPU it names must not be on another team's host (409, as telemetry answers); a
    GPU not reported yet is kept by UUID and joins its energy once its agent reports."""
    intervals = [IntervalInput(**item) for item in payload["intervals"]]
    named = sorted({gpu for item in intervals for gpu in item.accelerator_uuids})
    foreign = _gpus_elsewhere(team=team, uuids=named) if named else set()
    for i, item in enumerate(intervals):
        for j, gpu in enumerate(item.accelerator_uuids):
            if gpu in foreign:
                raise IngestRejected(
                    f"GPU {gpu!r} cannot be named with this token: it is registered to a host "
                    "the token cannot write to",
                    path=f"intervals[{i}].accelerator_uuids[{j}]",
                    code="accelerator_conflict",
                    status=409,
                )
    host = Host.objects.filter(team=team, hostname=payload["host"]).first()
    if host is None:
        host, _ = host_register(hostname=payload["host"], team_id=team.pk)
    accepted = inference_metrics_store(
        team=team, host=host, batch_id=payload["batch_id"], intervals=intervals
    )
    return {"batch_id": payload["batch_id"], "accepted": accepted}
