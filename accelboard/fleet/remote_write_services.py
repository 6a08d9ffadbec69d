"""Prometheus remote-write into the one telemetry ingest path: an adapter, no storage of its own.

``prometheus_write_ingest``:
1. Decode (``remote_write``: snappy, the protobuf WriteRequest) and map dcgm-exporter's series into
   one telemetry batch per host (``remote_write.dcgm_map``), all without the database.
2. The hosts' batches go through ``ingest_services.telemetry_batches_ingest`` together (validation,
   registration, the idempotency claims, COPY, the rollup marks: one pass, set-based statements for
   the whole request), in one transaction: a request with one bad series stores nothing. A refusal of the telemetry path names the series
   that gave the refused field (``samples[3].power_w`` becomes that series' labels) and is a 400
   (Prometheus drops a 4xx, retries a 5xx: data that fails validation fails again).
3. Idempotency: each host's batch id is the hash of the decompressed body and the host name, so a
   request Prometheus sends again stores nothing twice (the telemetry path's batch claim).
4. A GPU-instant split over several requests (Prometheus shards series and cuts requests at
   ``max_samples_per_send``) becomes one row: the telemetry path's merge (``merge=True``) fills the
   stored row's missing fields with a later part's, under a lock per host, all the request's taken
   first, in one statement, in key order (no deadlock between two requests carrying the same hosts).
5. Samples of metrics that are not mapped are counted by name (``PrometheusUnknownMetric``), shown
   by the pipeline status (``accelboard status``, ``/healthz?detail=1`` for staff).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from .ingest_services import telemetry_batches_ingest
from .ingest_validation import IngestRejected
from .models import PrometheusUnknownMetric
from .remote_write import (
    HostBatch,
    LabelNames,
    WriteRejected,
    dcgm_map,
    labels_text,
    snappy_decode,
    write_request_decode,
)

# The names kept (``PrometheusUnknownMetric``): a sender cannot grow the table without bound.
UNKNOWN_METRICS_KEPT = 1_000

_UNKNOWN_SQL = f"""
INSERT INTO {PrometheusUnknownMetric._meta.db_table} (name, samples, last_seen_at)
SELECT u.name, u.samples, now() FROM unnest(%s::text[], %s::bigint[]) AS u(name, samples)
WHERE EXISTS (SELECT 1 FROM {PrometheusUnknownMetric._meta.db_table} k WHERE k.name = u.name)
   OR (SELECT count(*) FROM {PrometheusUnknownMetric._meta.db_table}) < %s
ON CONFLICT (name) DO UPDATE
SET samples = {PrometheusUnknownMetric._meta.db_table}.samples + EXCLUDED.samples, last_seen_at = EXCLUDED.last_seen_at
"""


def unknown_metrics_count(*, counts: Counter[str]) -> None:
    """Add a request's samples of unmapped metrics to their names' totals: one statement, in
    autocommit after the request's transaction (its rows are the same few names for every
    request, which a long transaction would serialize), names in order (no deadlock)."""
    names = sorted(name[:200] for name in counts)
    if not names:
        return
    totals = Counter({name[:200]: 0 for name in counts})
    for name, samples in counts.items():
        totals[name[:200]] += samples
    with connection.cursor() as cursor:
        cursor.execute(_UNKNOWN_SQL, [names, [totals[name] for name in names], UNKNOWN_METRICS_KEPT])


def _label_names() -> LabelNames:
    return LabelNames(**settings.PROMETHEUS_LABELS)


_SAMPLE_PATH = re.compile(r"^samples\[(\d+)\](?:\.(\w+))?$")


def _named(exc: IngestRejected, batch: HostBatch) -> IngestRejected:
    """The telemetry path's refusal, naming the series instead of the generated batch's field."""
    found = _SAMPLE_PATH.match(exc.path)
    if found is None or int(found.group(1)) >= len(batch.sources):
        labels_hint = f" (host {batch.hostname!r})"
    else:
        sources = batch.sources[int(found.group(1))]
        labels = sources.get(found.group(2) or "") or next(iter(sources.values()), None)
        labels_hint = f" (series {labels_text(labels)})" if labels else f" (host {batch.hostname!r})"
    status = 400 if exc.status == 422 else exc.status
    return IngestRejected(f"{exc.message}{labels_hint}", path="", code=exc.code, status=status)


# Another app's store for the series it reads (``serving``'s vLLM and Triton intervals): called
# with the team, the decoded series and the request's digest inside the request's transaction;
# returns the metric names it read, which are then not unknown.
SeriesStore = Callable[..., set[str]]


def prometheus_write_ingest(
    *, team_id: int, body: bytes, serving: SeriesStore | None = None
) -> dict[str, Any]:
    """Store one remote-write request of ``team_id``'s (docs/api.md); return ``{"series",
    "samples", "stored", "duplicate", "unknown"}``. Raises ``IngestRejected`` (400, 409, 413)
    for a request that will never be stored; nothing of it is then stored."""
    try:
        raw = snappy_decode(body, max_bytes=settings.PROMETHEUS_WRITE_MAX_BYTES)
        series = write_request_decode(raw)
        mapped = dcgm_map(series, names=_label_names())
    except WriteRejected as exc:
        raise IngestRejected(exc.message, code=exc.code, status=exc.status) from None
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    stored = duplicates = 0
    # One pass of the telemetry path for all the request's hosts (one claim statement, one lock
    # statement, one merge, one COPY, ...: ``telemetry_batches_ingest``), one batch per host.
    batches = sorted(mapped.hosts, key=lambda host: host.hostname)
    payloads = [
        {
            "batch_id": f"prometheus:{digest}:{hashlib.blake2b(batch.hostname.encode(), digest_size=8).hexdigest()}",
            "host": {"hostname": batch.hostname},
            "accelerators": list(batch.accelerators.values()),
            "samples": batch.samples,
        }
        for batch in batches
    ]
    with transaction.atomic():
        try:
            results = telemetry_batches_ingest(team_id=team_id, payloads=payloads, merge=True)
        except IngestRejected as exc:
            if exc.index is None:
                raise
            raise _named(exc, batches[exc.index]) from None
        for result in results:
            if result["duplicate"]:
                duplicates += 1
            else:
                stored += result["accepted"]
        if serving is not None:
            for name in serving(team_id=team_id, series=series, request_id=digest):
                mapped.unknown.pop(name, None)
    if duplicates < len(mapped.hosts) or not mapped.hosts:  # a request sent again is counted once
        unknown_metrics_count(counts=mapped.unknown)
    return {
        "series": len(series),
        "samples": mapped.samples,
        "stored": stored,
        "duplicate": bool(mapped.hosts) and duplicates == len(mapped.hosts),
        "unknown": sum(mapped.unknown.values()),
    }
