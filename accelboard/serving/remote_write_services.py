"""vLLM's and Triton's series of a Prometheus remote-write request into serving intervals, through
the inference-metrics ingest (``services.inference_batch_store``, behind ``POST
/api/v1/inference-metrics``): no storage path of its own but the counters' last samples.

``prometheus_serving_ingest`` runs inside the remote-write request's transaction
(``fleet.remote_write_services.prometheus_write_ingest`` calls it with the decoded series):

1. ``remote_write.serving_extract`` picks and checks the series (a bad one: 400 naming it).
2. Under an advisory lock per (team, host), the series' stored last samples
   (``PrometheusSeriesState``) are read, the deltas taken (``remote_write.series_deltas``) and the
   new last samples written, in the request's transaction: a request that fails stores neither
   intervals nor state, so its retry computes the same deltas; a request stored before finds its
   samples no newer than the state and adds nothing.
3. The deltas, summed per interval (``remote_write.parts_build``), are added to the interval row
   stored before, if any (the series of one scrape arrive in several requests when Prometheus
   shards them), and the sums go through ``inference_batch_store``, which registers the host and
   the variant and replaces the row by (host, variant, interval_start).
   The interval's labels are the deployment labels its series and the row stored before agree on
   (``remote_write.labels_common``).
4. The interval's GPUs are the team's whole GPUs registered on the host (by dcgm-exporter's
   series of the same Prometheus, or an agent): the energy that cost per 1M tokens joins.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accelboard.benchmarks.models import ModelVariant
from accelboard.benchmarks.selectors import model_variant_resolve
from accelboard.core.models import Team
from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.fleet.models import Accelerator, Host
from accelboard.fleet.remote_write import Series, WriteRejected

from .models import InferenceMetric, PrometheusSeriesState
from .remote_write import (
    KNOWN,
    MAX_INTERVAL_MS,
    Accumulated,
    Part,
    PartKey,
    ServingNames,
    Target,
    accumulated_read,
    interval_fields,
    interval_start,
    labels_common,
    parts_build,
    series_deltas,
    serving_extract,
)
from .services import inference_batch_store

_LOCK_NAMESPACE = zlib.crc32(b"accelboard.serving.remote_write") & 0x7FFFFFFF  # int4 key
_ROW_FIELDS = (
    "variant_id", "interval_start", "interval_s", "requests", "errors", "prompt_tokens", "generated_tokens",
    "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "queue_p50_ms",
    "queue_p99_ms", "histograms", "latency_sums", "accelerator_uuids", "engine", "labels",
)  # fmt: skip


def serving_names() -> ServingNames:
    return ServingNames(
        hosts=tuple(settings.PROMETHEUS_SERVING_HOST_LABELS),
        variant=settings.PROMETHEUS_LABEL_VARIANT,
        default_variant=settings.PROMETHEUS_SERVING_VARIANT,
        deployment=tuple(settings.PROMETHEUS_SERVING_DEPLOYMENT_LABELS),
    )


def _host_lock(team_id: int, hosts: list[str]) -> None:
    with connection.cursor() as cursor:
        for host in sorted(hosts):  # one order for every request: no deadlock
            key = zlib.crc32(f"{team_id}:{host}".encode()) & 0x7FFFFFFF
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, key])


def _stored_rows(
    *, team: Team, host: Host | None, parts: dict[PartKey, Part]
) -> dict[tuple[Target, int], dict[str, Any]]:
    """The interval rows stored before for ``parts``' keys (none on a host not registered yet)."""
    if host is None:
        return {}
    variants: dict[tuple[str, str], ModelVariant | None] = {}
    for target, _ in parts:
        key = (target.model, target.variant)
        if key not in variants:
            variants[key] = model_variant_resolve(team=team, model=target.model, variant=target.variant)
    known = {variant.pk: key for key, variant in variants.items() if variant is not None}
    if not known:
        return {}
    starts = sorted({interval_start(start_ms) for _, start_ms in parts})
    found: dict[tuple[Target, int], dict[str, Any]] = {}
    by_key = {((t.model, t.variant), interval_start(ms)): (t, ms) for t, ms in parts}
    rows = InferenceMetric.objects.filter(
        team=team, host=host, variant_id__in=list(known), interval_start__in=starts
    ).values(*_ROW_FIELDS)
    for row in rows:
        part_key = by_key.get((known[row["variant_id"]], row["interval_start"]))
        if part_key is not None:
            found[part_key] = row
    return found


def _host_store(*, team: Team, hostname: str, parts: dict[PartKey, Part], request_id: str) -> int:
    host = Host.objects.filter(team=team, hostname=hostname).first()
    stored = _stored_rows(team=team, host=host, parts=parts)
    gpus: list[str] = []
    if host is not None:
        gpus = list(
            Accelerator.objects.filter(host=host, parent_uuid="")
            .order_by("uuid")
            .values_list("uuid", flat=True)
        )
    intervals: list[dict[str, Any]] = []
    ordered = sorted(parts.items(), key=lambda item: (item[0][1], item[0][0].model, item[0][0].variant))
    for (target, start_ms), part in ordered:
        row = stored.get((target, start_ms))
        total = (
            accumulated_read(row)
            if row is not None
            else Accumulated(interval_s=part.interval_s, engine=target.engine)
        )
        total.add(part)
        uuids = sorted({*gpus, *(row["accelerator_uuids"] if row is not None else [])})
        labels = part.labels or {}
        if row is not None:
            labels = labels_common(row["labels"] or {}, labels)
        intervals.append(
            {
                "model": target.model,
                "variant": target.variant,
                "engine": target.engine,
                "interval_start": interval_start(start_ms),
                "accelerator_uuids": uuids[:64],
                "labels": labels,
                **interval_fields(total),
            }
        )
    payload = {"batch_id": f"prometheus:{request_id}"[:64], "host": hostname, "intervals": intervals}
    try:
        return int(inference_batch_store(team=team, payload=payload)["accepted"])
    except IngestRejected as exc:
        where = f" (host {hostname!r})"
        if exc.path.startswith("intervals["):
            named = ordered[int(exc.path.split("[")[1].split("]")[0])][1]
            where = f" (series {named.series['']})"
        raise IngestRejected(
            f"{exc.message}{where}", path="", code=exc.code, status=400 if exc.status == 422 else exc.status
        ) from None


_PREFIXES = tuple(
    sorted({"vllm:" if name.startswith("vllm:") else name.split("_")[0] + "_" for name in KNOWN})
)


def prometheus_serving_ingest(
    *, team_id: int, series: list[Series], request_id: str, refused: Counter[str] | None = None
) -> set[str]:
    """Store the serving intervals that ``series`` (a decoded remote-write request of the team's)
    complete; return the metric names read (not unknown). Raises ``IngestRejected`` (400) for a
    bad series; call it inside the request's transaction, which it leaves to roll back. Series
    refused for their host label are counted in ``refused``."""
    # Mostly dcgm-exporter's series: one pass keeps the few of vLLM and Triton.
    series = [item for item in series if item.labels.get("__name__", "").startswith(_PREFIXES)]
    names = {item.name for item in series if item.name in KNOWN}
    try:
        now_ms = int(timezone.now().timestamp() * 1000)
        extracted = serving_extract(series, names=serving_names(), now_ms=now_ms, refused=refused)
    except WriteRejected as exc:
        raise IngestRejected(exc.message, code=exc.code, status=exc.status) from None
    if not extracted:
        return names
    with transaction.atomic():
        _host_lock(team_id, sorted({item.target.host for item in extracted}))
        keys = sorted({item.key for item in extracted})
        state = {
            key: (last_ms, value)
            for key, last_ms, value in PrometheusSeriesState.objects.filter(
                team_id=team_id, key__in=keys
            ).values_list("key", "last_ms", "value")
        }
        deltas, updated = series_deltas(extracted, state)
        if updated:
            metric = {item.key: item.labels.get("__name__", "")[:200] for item in extracted}
            PrometheusSeriesState.objects.bulk_create(
                [
                    PrometheusSeriesState(
                        team_id=team_id, key=key, metric=metric[key], last_ms=last_ms, value=value
                    )
                    for key, (last_ms, value) in sorted(updated.items())
                ],
                update_conflicts=True,
                unique_fields=["team", "key"],
                update_fields=["last_ms", "value", "metric"],
            )
        by_host: dict[str, dict[PartKey, Part]] = defaultdict(dict)
        for key, part in parts_build(deltas).items():
            by_host[key[0].host][key] = part
        if by_host:
            team = Team.objects.get(pk=team_id)
            for hostname in sorted(by_host):
                _host_store(team=team, hostname=hostname, parts=by_host[hostname], request_id=request_id)
    return names


def prometheus_series_state_prune(*, now_ms: int) -> int:
    """Forget the counters of series not seen for longer than ``MAX_INTERVAL_MS``: their next
    sample would be a new baseline anyway (no interval spans more than a day), so their state is
    dead weight (a vLLM pod that went away, a model renamed). Returns how many were forgotten."""
    deleted, _ = PrometheusSeriesState.objects.filter(last_ms__lt=now_ms - MAX_INTERVAL_MS).delete()
    return deleted
