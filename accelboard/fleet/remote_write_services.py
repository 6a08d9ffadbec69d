"""Prometheus remote-write into the one telemetry ingest path: an adapter, no storage of its own.

``prometheus_write_ingest``:
1. Decode (``remote_write``: snappy, the protobuf WriteRequest) and map dcgm-exporter's series into
   one telemetry batch per host (``remote_write.dcgm_map``), all without the database.
2. The hosts' batches go through ``ingest_services.telemetry_batches_ingest`` together, validated
   once for the whole request (``host_batches_prepare``; the telemetry path's own validation where
   a check fails, for its error) (registration, the idempotency claims, COPY, the rollup marks: one pass, set-based statements for
   the whole request), in one transaction: a request with one bad series stores nothing. A refusal of the telemetry path names the series
   that gave the refused field (``samples[3].power_w`` becomes that series' labels) and is a 400
   (Prometheus drops a 4xx, retries a 5xx: data that fails validation fails again).
3. Idempotency: each host's batch id is the hash of the decompressed body and the host name, so a
   request Prometheus sends again stores nothing twice (the telemetry path's batch claim).
4. A GPU-instant split over several requests (Prometheus shards series and cuts requests at
   ``max_samples_per_send``) becomes one row: the telemetry path's merge (``merge=True``) fills the
   stored row's missing fields with a later part's, under its GPU's lock, exclusive, and its host's,
   shared (``ingest_services.telemetry_merge_lock``), all the request's taken first, in one
   statement, in key order: Prometheus's shards each carry a slice of every host, mostly of other
   GPUs, and no longer wait for each other (with every host's lock exclusive they went one at a
   time, 2026-12-07); an agent's batch takes its host's exclusive and still excludes them.
5. The pods dcgm-exporter names on a GPU (``pod``, ``namespace``, ``container``) become the batch's
   ``attribution`` (``remote_write_pods``: one instant holds until the GPU's next, at most the
   scrape interval). ``_pods_attribution``, under the GPU locks above (each device's intervals
   are read and written by requests holding its GPU's lock), takes the attribution's lock of the
   request's hosts shared (an agent's or the attribution API's batch, exclusive, waits; a new
   host's first requests wait on its name, one at a time), reads the stored intervals of their devices over the request's span, and
   sends only what they leave uncovered: a part of a scrape, a request sent again or one with
   another step never stores a moment twice and never conflicts (409) with what is stored. An
   interval continuing a stored row of the same lone pod extends that row
   (``attribution_services.attribution_extend``) instead of adding one.
6. Samples of metrics that are not mapped are counted by name (``PrometheusUnknownMetric``), shown
   by the pipeline status (``accelboard status``, ``/healthz?detail=1`` for staff).
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
import zlib
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction

from .attribution_services import ADVISORY_ATTRIBUTION, attribution_extend
from .attribution_validation import attribution_parse
from .ingest_services import PreparedBatch, merge_lock_devices, telemetry_batches_ingest, telemetry_merge_lock
from .ingest_validation import (
    EARLIEST,
    MAX_FUTURE,
    MAX_SAMPLES,
    SAMPLE_FIELDS,
    SAMPLE_KEYS,
    IngestRejected,
    TelemetryBatch,
    telemetry_batch_parse,
)
from .models import PrometheusUnknownMetric
from .remote_write import (
    HostBatch,
    LabelNames,
    WriteRejected,
    labels_text,
    snappy_decode,
    write_request_map,
)
from .remote_write_pods import StoredInterval, pod_intervals, pod_intervals_extend, pod_intervals_trim

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
    return _names_of(tuple(sorted(settings.PROMETHEUS_LABELS.items())))


@functools.lru_cache(maxsize=8)
def _names_of(items: tuple[tuple[str, str], ...]) -> LabelNames:
    # One instance while the settings hold: the mapping's caches compare it by identity first.
    return LabelNames(**dict(items))


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


# The attribution's lock of each host (``attribution_services``: its agent's batches take it
# too), taken in id order before the stored intervals are read, held to the commit; and for hosts
# not stored yet a lock on each name (the second key: the name's hash), in name order, so that a
# new host's first requests go one at a time. The subqueries' order is the locks' (OFFSET 0 keeps
# them from being flattened).
# The latest end an interval may have, ahead of now (the attribution refuses over 5 minutes ahead,
# from the moment the batch is validated, a little later).
_AHEAD_MS = 299_000
_LOCK_PODS = zlib.crc32(b"accelboard.fleet.remote_write.pods") & 0x7FFFFFFF
_HOST_LOCKS_SQL = """
SELECT hostname, id, pg_advisory_xact_lock_shared(%s, id::int4)
FROM (SELECT hostname, id FROM fleet_host WHERE hostname = ANY(%s) AND team_id = %s ORDER BY id OFFSET 0) h
"""
_NAME_LOCKS_SQL = """
SELECT pg_advisory_xact_lock(%s, hashtext(n)) FROM (SELECT unnest(%s::text[]) AS n ORDER BY n OFFSET 0) s
"""
# Rows never cross midnight: those overlapping [first, last), or ending at first, start on or
# after first's day. The devices' ids are found first (``ARRAY(...)``: the index on
# (accelerator_id, start) then reads each device's rows of the span); joined on the devices
# instead, PostgreSQL read every row of the day since midnight and checked each one's device
# against the request's list (7.2 ms a request of 128 devices at 4,000 rows that day, against
# ~0.2 ms: a day of a 16,000-GPU fleet holds ~400,000).
_POD_STORED_SQL = """
SELECT g.id, a.uuid, g.start, g."end", w.kind, w.uid, g.share, g.basis
FROM fleet_gpuattribution g
JOIN fleet_accelerator a ON a.id = g.accelerator_id
JOIN fleet_workload w ON w.id = g.workload_id
WHERE g.accelerator_id = ANY(ARRAY(
    SELECT d.id FROM fleet_accelerator d WHERE d.host_id = ANY(%s::int8[]) AND d.uuid = ANY(%s::text[])
)) AND g.start >= %s AND g.start < %s AND g."end" >= %s
"""


def _stored_fetch(params: list[Any]) -> list[tuple[Any, ...]]:
    """``_POD_STORED_SQL``'s rows, bound on the server, prepared once per connection, in binary:
    Django's cursor binds on the client (quoting each host id and UUID of the arrays) and parses
    each row's two timestamps from text, 1.16 against 0.40 ms of web CPU a request of 54 hosts
    (2026-12-07, docs/scaling.md)."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_POD_STORED_SQL, params, prepare=True, binary=True)
        return cursor.fetchall()


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _pods_attribution(*, team_id: int, hosts: list[HostBatch]) -> dict[str, list[dict[str, Any]]]:
    """Each host batch's pod intervals less what is stored (the module's docstring, 5), as its
    telemetry batch's ``attribution``, by host name (hosts with none left out). Takes the locks it
    describes; a few statements for the whole request, whatever its number of hosts."""
    scrape_ms = round(settings.PROMETHEUS_SCRAPE_INTERVAL_S * 1000)
    until_ms = round(time.time() * 1000) + _AHEAD_MS
    by_host = {
        batch.hostname: pod_intervals(batch.holders, scrape_ms=scrape_ms, until_ms=until_ms)
        for batch in hosts
    }
    by_host = {hostname: intervals for hostname, intervals in by_host.items() if intervals}
    if not by_host:
        return {}
    names = sorted(by_host)
    with connection.cursor() as cursor:
        cursor.execute(_HOST_LOCKS_SQL, [ADVISORY_ATTRIBUTION, names, team_id])
        host_ids = {hostname: host_id for hostname, host_id, _ in cursor.fetchall()}
        missing = [name for name in names if name not in host_ids]
        if missing:  # wait for a request storing it first, then look again
            cursor.execute(_NAME_LOCKS_SQL, [_LOCK_PODS, missing])
            cursor.execute(_HOST_LOCKS_SQL, [ADVISORY_ATTRIBUTION, missing, team_id])
            host_ids.update((hostname, host_id) for hostname, host_id, _ in cursor.fetchall())
        # A host not stored (or another team's: a 409 later) has no intervals.
        known = [interval for name in names if name in host_ids for interval in by_host[name]]
        if known:
            start = _moment(min(interval.start_ms for interval in known))
            end = _moment(max(interval.end_ms for interval in known))
            floor = datetime(start.year, start.month, start.day, tzinfo=UTC)
            devices = sorted({interval.gpu for interval in known})
            rows = [
                StoredInterval(row_id, uuid, _ms(low), _ms(high), (kind, uid), share, basis)
                for row_id, uuid, low, high, kind, uid, share, basis in _stored_fetch(
                    [sorted(host_ids.values()), devices, floor, end, start]
                )
            ]
            stored: dict[str, list[tuple[int, int]]] = {}
            rows_of: dict[str, list[StoredInterval]] = {}
            for row in rows:
                stored.setdefault(row.gpu, []).append((row.start_ms, row.end_ms))
                rows_of.setdefault(row.gpu, []).append(row)
            extended: list[tuple[StoredInterval, int]] = []
            for name in names:
                if name in host_ids and rows:
                    left = pod_intervals_trim(by_host[name], stored=stored)
                    # Only the rows of the host's own devices: an interval extends a row of its
                    # device alone, and all the request's rows for each host made the loop
                    # quadratic in the request's hosts (~1 ms of a 54-host request, 2026-12-07).
                    more, by_host[name] = pod_intervals_extend(
                        left, stored=[row for gpu in {i.gpu for i in left} for row in rows_of.get(gpu, ())]
                    )
                    extended += more
            attribution_extend(
                rows=[(row.id, _moment(row.start_ms), _moment(new_end)) for row, new_end in extended]
            )
    out = {name: [item for interval in by_host[name] for item in interval.attribution()] for name in names}
    return {name: items for name, items in out.items() if items}


def host_payloads(
    batches: list[HostBatch], *, digest: str, pods: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each host batch as a telemetry payload (docs/api-contract.md), its batch id the request's
    ``digest`` and its host's, its ``attribution`` the pods' intervals (``_pods_attribution``)."""
    payloads: list[dict[str, Any]] = []
    for batch in batches:
        host_digest = hashlib.blake2b(batch.hostname.encode(), digest_size=8).hexdigest()
        payload = {
            "batch_id": f"prometheus:{digest}:{host_digest}",
            "host": {"hostname": batch.hostname},
            "accelerators": list(batch.accelerators.values()),
            "samples": batch.samples,
        }
        if batch.hostname in pods:
            payload["attribution"] = pods[batch.hostname]
        payloads.append(payload)
    return payloads


_EARLIEST_EPOCH = EARLIEST.timestamp()
_INTEGER_TYPES = frozenset({int, type(None)})
_NUMBER_TYPES = frozenset({int, float, type(None)})


# A host payload's head (its host and GPUs) as ``telemetry_batch_parse`` validated it, by the host
# name and its accelerators' ``repr`` (each value with its type): a host's payloads list the same
# GPUs request after request (a shard's slice of its series), and validating them anew was most of
# ``host_batches_prepare``'s time. A head that fails is not kept (checked again each time).
_HEADS: dict[tuple[str, str], tuple[str, dict[str, Any], list[dict[str, Any]]]] = {}
_HEADS_KEPT = 50_000


def _head_parse(
    payload: dict[str, Any], *, now: datetime
) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(hostname, host facts, accelerators) of a ``host_payloads`` payload, validated as
    ``telemetry_batch_parse`` validates a payload without samples (its batch id is the request's
    digest and its host's, 60 characters: always valid); copies, so that no caller shares them.
    Raises ``IngestRejected`` as that does."""
    key = (payload["host"]["hostname"], repr(payload["accelerators"]))
    found = _HEADS.get(key)
    if found is None:
        head = telemetry_batch_parse({**payload, "samples": [], "attribution": None}, now=now)
        found = (head.hostname, head.host_facts, head.accelerators)
        if len(_HEADS) >= _HEADS_KEPT:
            _HEADS.clear()
        _HEADS[key] = found
    hostname, facts, accelerators = found
    return hostname, dict(facts), [dict(gpu) for gpu in accelerators]


def host_batches_prepare(payloads: list[dict[str, Any]], *, now: datetime) -> list[PreparedBatch] | None:
    """The request's host payloads as the telemetry path's validated batches
    (``telemetry_batches_ingest(prepared=...)``), their samples checked once for the whole
    request instead of host by host: a request holds ~54 hosts of ~2 GPU-instants each, and
    ``telemetry_batch_parse`` built and checked 26 columns for each of them (~3 ms of web CPU a
    request, 2026-12-07, docs/scaling.md). The same checks on the same values: every sample's
    keys, GPU, time (not before 2000 nor over 5 minutes ahead of ``now``) and each field's type
    and range; the host and GPU registrations still through ``telemetry_batch_parse`` (a payload
    without samples), the pods' intervals through ``attribution_parse``. None when any check
    fails: the caller then hands the payloads to the telemetry path, whose validation names the
    first bad field as before (the same 4xx for the same input)."""
    samples = [sample for payload in payloads for sample in payload["samples"]]
    if not samples or any(len(payload["samples"]) > MAX_SAMPLES for payload in payloads):
        return None
    carried = set().union(*samples)
    if not carried <= SAMPLE_KEYS:
        return None
    gpus = [sample.get("gpu") for sample in samples]
    if set(map(type, gpus)) != {str} or not all(gpus) or max(map(len, set(gpus))) > 96:
        return None
    epochs = [sample.get("time") for sample in samples]
    if set(map(type, epochs)) != {float}:
        return None
    if min(epochs) < _EARLIEST_EPOCH or max(epochs) > (now + MAX_FUTURE).timestamp():
        return None
    columns: dict[str, list[Any]] = {}
    for name, (integer, lowest, highest) in SAMPLE_FIELDS.items():
        if name not in carried:
            continue
        column = [sample.get(name) for sample in samples]
        types = set(map(type, column))
        if not types <= (_INTEGER_TYPES if integer else _NUMBER_TYPES):
            return None
        present = [value for value in column if value is not None] if None in column else column
        if present and (min(present) < lowest or max(present) > highest):
            return None
        columns[name] = column
    out: list[PreparedBatch] = []
    start = 0
    try:
        for payload in payloads:
            count = len(payload["samples"])
            stop = start + count
            hostname, host_facts, accelerators = _head_parse(payload, now=now)
            batch = TelemetryBatch(
                batch_id=payload["batch_id"],
                hostname=hostname,
                host_facts=host_facts,
                accelerators=accelerators,
                gpus=gpus[start:stop],
                epochs=epochs[start:stop],
                columns={
                    name: columns[name][start:stop] if name in columns else [None] * count
                    for name in SAMPLE_FIELDS
                },
                samples=payload["samples"],
            )
            given = payload.get("attribution")
            attribution = None if given is None else attribution_parse(given, now=now)
            # Keyed by the body (``keyed_by_body``): no digest kept with the claim.
            out.append(PreparedBatch(batch=batch, attribution=attribution, digest=""))
            start = stop
    except IngestRejected:
        return None
    return out


# Another app's store for the series it reads (``serving``'s vLLM and Triton intervals): called
# with the team, the decoded series and the request's digest inside the request's transaction;
# returns the metric names it read, which are then not unknown.
SeriesStore = Callable[..., set[str]]


def prometheus_write_ingest(
    *, team_id: int, body: bytes, serving: SeriesStore | None = None
) -> dict[str, Any]:
    """Store one remote-write request of ``team_id``'s (docs/api.md); return ``{"series",
    "samples", "stored", "duplicate_samples", "duplicate", "unknown"}`` (``duplicate_samples``:
    samples whose fields were all stored already, by an earlier request, skipped). Raises ``IngestRejected`` (400, 409, 413)
    for a request that will never be stored; nothing of it is then stored."""
    try:
        raw = snappy_decode(body, max_bytes=settings.PROMETHEUS_WRITE_MAX_BYTES)
        series_count, mapped = write_request_map(raw, names=_label_names())
    except WriteRejected as exc:
        raise IngestRejected(exc.message, code=exc.code, status=exc.status) from None
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    stored = duplicates = duplicate_samples = 0
    with transaction.atomic():
        # The merge locks first (the module's docstring, 4): each host's shared, each GPU's
        # exclusive, the ones the telemetry path would take (``locked=True`` below: once); the pods' read of the stored
        # intervals and what it writes are then under the lock of each device they are of.
        if mapped.hosts:
            telemetry_merge_lock(
                hostnames=[batch.hostname for batch in mapped.hosts],
                devices={
                    device
                    for batch in mapped.hosts
                    for device in merge_lock_devices(
                        gpus=[sample["gpu"] for sample in batch.samples],
                        accelerators=batch.accelerators.values(),
                    )
                },
            )
        pods = _pods_attribution(team_id=team_id, hosts=mapped.hosts)
        # One pass of the telemetry path for all the request's hosts (one claim statement, one
        # lock statement, one merge, one COPY, ...: ``telemetry_batches_ingest``), a batch a host.
        batches = sorted(mapped.hosts, key=lambda host: host.hostname)
        payloads = host_payloads(batches, digest=digest, pods=pods)
        prepared = host_batches_prepare(payloads, now=datetime.now(UTC))
        try:
            # The batch ids are the body's digest already: a retry is the same body.
            results = telemetry_batches_ingest(
                team_id=team_id,
                payloads=payloads if prepared is None else (),
                prepared=prepared,
                merge=True,
                keyed_by_body=True,
                locked=True,
            )
        except IngestRejected as exc:
            if exc.index is None:
                raise
            raise _named(exc, batches[exc.index]) from None
        for result in results:
            if result["duplicate"]:
                duplicates += 1
            else:
                stored += result["accepted"]
                duplicate_samples += result.get("duplicate_samples", 0)
        if serving is not None:
            # The series the mapping did not read: dcgm-exporter's are none of serving's.
            for name in serving(
                team_id=team_id, series=mapped.others, request_id=digest, refused=mapped.refused
            ):
                mapped.unknown.pop(name, None)
    if duplicates < len(mapped.hosts) or not mapped.hosts:  # a request sent again is counted once
        unknown_metrics_count(counts=mapped.unknown + mapped.refused)
    return {
        "series": series_count,
        "samples": mapped.samples,
        "stored": stored,
        "duplicate_samples": duplicate_samples,
        "duplicate": bool(mapped.hosts) and duplicates == len(mapped.hosts),
        "unknown": sum(mapped.unknown.values()),
        "refused": sum(mapped.refused.values()),
    }
