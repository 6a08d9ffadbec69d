"""Telemetry ingest, end to end: one batch from a decoded payload to its rows and its rollup mark.

``telemetry_batch_ingest`` is the one entry (the API's ``POST /telemetry`` calls it):
1. Validate (``ingest_validation.telemetry_batch_parse``), without the database.
2. Create the daily partitions the batch needs, committed before the batch's transaction
   (``partition_services.telemetry_partitions_ensure``): an empty partition is not data, and
   ``CREATE TABLE ... PARTITION OF`` would otherwise lock the parent table for the whole batch.
3. In one transaction: the idempotency claim of the batch id (``core.idempotency_services``: a
   retry of a stored batch gets its stored result back), then ``telemetry_batch_store``: refuse a host or GPU
   owned by another team, register the host and GPUs (by UUID; ``host_services``), binary-COPY the
   rows and their partial aggregates (``partition_services``), move each GPU's ``last_state`` to
   its newest sample and mark the batch's range dirty for the rollups, in one statement.
4. After the commit, ask for one rollup drain for the whole fleet
   (``rollup_request_services.telemetry_rollups_request``): no task per batch.
A batch may carry ``attribution`` (docs/attribution.md): its intervals are validated with the
batch (``attribution_validation``), need partitions for their days too, and are stored in the
same transaction after the registration (``attribution_services.attribution_store``); a batch
without them runs exactly the statements it ran before.
A Prometheus remote-write batch (``merge=True``) may carry the other part of a GPU-instant
already stored (Prometheus splits a scrape over several requests): under a per-host advisory lock,
one statement fills the stored rows' missing fields (``_MERGE_SQL``) and only the rest is copied;
the agent's batches, always whole, run none of it.
A cached registration that no longer holds (``StaleRegistration``) or a remembered partition that
is gone rolls the whole transaction back, and the batch is stored once more, the long way.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

import numpy as np
import orjson
from django.db import IntegrityError, connection, transaction

from accelboard.core.choices import BatchKind
from accelboard.core.idempotency_services import ingest_batch_claim, ingest_batch_result_set

from .attribution_services import attribution_range, attribution_store
from .attribution_validation import Attribution, telemetry_batch_attribution_parse
from .host_services import HOST_FIELDS, host_register
from .ingest_validation import SAMPLE_FIELDS, IngestRejected, TelemetryBatch
from .models import Accelerator, Host
from .partition_services import (
    telemetry_copy,
    telemetry_partials_write,
    telemetry_partitions_ensure,
    telemetry_partitions_forget,
)
from .rollup_request_services import telemetry_rollups_request

# The COPY column order: the fixed columns, then the sample fields in SAMPLE_FIELDS order.
COPY_COLUMNS = ("time", "host_id", "accelerator_id", *SAMPLE_FIELDS)


def telemetry_batch_ingest(*, team_id: int, payload: object, merge: bool = False) -> dict[str, Any]:
    """Validate and store one telemetry batch of ``team_id``'s (docs/api-contract.md); idempotent
    on its batch_id (``core.idempotency_services``, claimed in the batch's transaction); return ``{"batch_id", "accepted", "duplicate"}``,
    and ``attribution`` (intervals stored) and ``attribution_duplicates`` (intervals already stored,
    skipped) when the batch carries attribution.

    The batch's time range is marked dirty in its transaction; after the commit one rollup drain
    is asked for (``telemetry_rollups_request``, one per ``ROLLUP_INTERVAL_S`` across every web
    process). Raises ``IngestRejected`` for a batch that cannot be stored. ``merge``: samples at
    an instant its GPU already has a row at fill that row's missing fields (``telemetry_batch_store``).
    """
    received_at = datetime.now(UTC)
    batch, attribution = telemetry_batch_attribution_parse(payload, now=received_at)
    # The result is known before the write (the samples it accepts; the intervals, unless some
    # were stored already), so it is stored with the claim, saving the write its own UPDATE.
    known: dict[str, Any] = {"batch_id": batch.batch_id, "accepted": len(batch.gpus)}
    # The days the samples need, and those the intervals need (each range bounded on its own:
    # the days between them, if any, are not made).
    ranges = [(batch.start, batch.end)] if batch.start is not None and batch.end is not None else []
    if attribution is not None:
        known.update(attribution=len(attribution), attribution_duplicates=0)
        if len(attribution):
            ranges.append(attribution_range(attribution))
    for attempt in (1, 2):
        for start, end in ranges:
            # Created (and committed) before the batch's transaction: an empty partition is not
            # data, and CREATE TABLE ... PARTITION OF would otherwise lock the parent table for
            # the whole batch.
            telemetry_partitions_ensure(start=start, end=end, remembered=True)
        try:
            with transaction.atomic():
                stored = ingest_batch_claim(
                    team_id=team_id, kind=BatchKind.TELEMETRY, client_id=batch.batch_id, result=known
                )
                if stored is not None:
                    return {**stored, "duplicate": True}
                stored_counts = telemetry_batch_store(
                    batch=batch,
                    team_id=team_id,
                    received_at=received_at,
                    attribution=attribution,
                    merge=merge,
                )
                if stored_counts["accepted"]:
                    transaction.on_commit(telemetry_rollups_request, robust=True)
                result = {"batch_id": batch.batch_id, **stored_counts}
                if result["accepted"] != known["accepted"]:
                    raise AssertionError(f"telemetry {batch.batch_id}: wrote {result}, claimed {known}")
                if result != known:  # some intervals were stored already
                    ingest_batch_result_set(
                        team_id=team_id, kind=BatchKind.TELEMETRY, client_id=batch.batch_id, result=result
                    )
        except StaleRegistration:
            # The cached registration no longer held (dropped by the store): all rolled back;
            # the second attempt registers the long way.
            if attempt == 2:
                raise
            continue
        except IntegrityError as exc:
            # A remembered partition is gone (all rolled back): read the catalogue and go again.
            if attempt == 2 or "no partition" not in str(exc):
                raise
            telemetry_partitions_forget()
            continue
        return {**result, "duplicate": False}
    raise AssertionError("unreachable")  # pragma: no cover


def _owned_elsewhere(*, batch: TelemetryBatch, team_id: int) -> IngestRejected | None:
    host_team = Host.objects.filter(hostname=batch.hostname).values_list("team_id", flat=True).first()
    if host_team is not None and host_team != team_id:
        return IngestRejected(
            f"host name {batch.hostname!r} cannot be used with this token (host names are unique); "
            "use the token the host was registered with, or give the host another name",
            path="host.hostname",
            code="host_conflict",
            status=409,
        )
    uuids = [gpu["uuid"] for gpu in batch.accelerators]
    if uuids:
        foreign = set(
            Accelerator.objects.filter(uuid__in=uuids)
            .exclude(host__team_id=team_id)
            .exclude(host__team__isnull=True)
            .values_list("uuid", flat=True)
        )
        for i, gpu_uuid in enumerate(uuids):
            if gpu_uuid in foreign:
                return IngestRejected(
                    f"GPU {gpu_uuid!r} cannot be registered with this token: it is on a host the "
                    "token cannot write to",
                    path=f"accelerators[{i}].uuid",
                    code="accelerator_conflict",
                    status=409,
                )
    return None


# One statement after the COPY: each GPU's ``last_state`` moves to its newest sample of the batch
# (unless it has a newer one), the host's ``last_seen_at`` to the time of the request, and the
# batch's range is marked dirty for the rollups (a merged batch's ``last_state`` adds its fields to
# a state of the same instant instead of replacing it). It returns what the fast path must confirm: the
# host still belongs to the token's team, and every GPU of the batch is still on that host.
_FINAL_SQL = """
WITH dirty AS (
    INSERT INTO fleet_telemetrydirtyrange (start, "end", host_id, created_at) VALUES (%s, %s, %s, now())
),
host AS (
    UPDATE fleet_host SET last_seen_at = %s
    WHERE id = %s AND team_id = %s AND (last_seen_at IS NULL OR last_seen_at < %s)
    RETURNING id
),
state AS (
    UPDATE fleet_accelerator AS a
    SET last_state = {state}, last_seen_at = v.seen
    FROM (VALUES {values}) AS v(id, state, seen)
    WHERE a.id = v.id
      AND (a.last_state->>'time' IS NULL OR (a.last_state->>'time')::timestamptz <= v.seen)
    RETURNING a.id
)
SELECT
    (SELECT count(*) FROM fleet_host WHERE id = %s AND team_id = %s),
    (SELECT count(*) FROM fleet_accelerator WHERE id = ANY(%s) AND host_id = %s)
"""


def _final_write(
    *,
    batch: TelemetryBatch,
    host_id: int,
    team_id: int,
    accelerator_ids: list[int],
    received_at: datetime,
    also: list[int],
    merge: bool = False,
) -> bool:
    """Run ``_FINAL_SQL``; True when the host is the team's and every GPU is on it (those of the
    samples, and ``also``: devices without samples the batch relied on)."""
    codes = np.fromiter(accelerator_ids, dtype=np.int64, count=len(accelerator_ids))
    epochs = np.fromiter(batch.epochs, dtype=np.float64, count=len(batch.epochs))
    order = np.lexsort((epochs, codes))
    sorted_codes = codes[order]
    newest = order[np.r_[sorted_codes[1:] != sorted_codes[:-1], True]]
    values, params = [], []
    for index in newest.tolist():
        seen = datetime.fromtimestamp(batch.epochs[index], UTC)
        state = {**batch.samples[index], "time": seen.isoformat()}
        if merge:
            state = {name: value for name, value in state.items() if value is not None}
        values.append("(%s::bigint, %s, %s::timestamptz)")
        params.extend([accelerator_ids[index], orjson.dumps(state).decode(), seen])
    distinct = sorted({*accelerator_ids, *also})
    with connection.cursor() as cursor:
        cursor.execute(
            _FINAL_SQL.format(values=", ".join(values), state=_MERGED_STATE if merge else "v.state::jsonb"),
            [
                batch.start,
                batch.end,
                host_id,
                received_at,
                host_id,
                team_id,
                received_at,
                *params,
                host_id,
                team_id,
                distinct,
                host_id,
            ],
        )
        hosts, gpus = cursor.fetchone()
    return hosts == 1 and gpus == len(distinct)


_MERGED = "(a.last_state || v.state::jsonb)"
# The merged state's memory total, as ``_MERGED_TOTAL`` computes the row's.
_MERGED_STATE = f"""CASE WHEN (a.last_state->>'time')::timestamptz = v.seen
        THEN {_MERGED} || CASE WHEN {_MERGED} ? 'mem_used_bytes' AND {_MERGED} ? 'mem_free_bytes'
            THEN jsonb_build_object('mem_total_bytes', ({_MERGED}->>'mem_used_bytes')::bigint
                + ({_MERGED}->>'mem_free_bytes')::bigint
                + coalesce(({_MERGED}->>'mem_reserved_bytes')::bigint, 0))
            ELSE '{{}}'::jsonb END
        ELSE v.state::jsonb END"""

# Remote-write merge (``telemetry_batch_store(merge=True)``). Two requests of one host merging at
# once would both miss the other's uncommitted rows and both insert: a lock per host serializes
# them (taken in its own statement, so the merge's snapshot sees what the lock's holder committed).
_ADVISORY_MERGE = 7_310_003
# dcgm-exporter's framebuffer parts may come in different requests: once the merged row has both
# used and free, its total is their sum with the reserved part (when known), whichever request
# brought which (the mapping computes the same when they come together); else as any field.
_MERGED_TOTAL = """mem_total_bytes = CASE
        WHEN COALESCE(s.mem_used_bytes, v.mem_used_bytes) IS NOT NULL
            AND COALESCE(s.mem_free_bytes, v.mem_free_bytes) IS NOT NULL
        THEN COALESCE(s.mem_used_bytes, v.mem_used_bytes) + COALESCE(s.mem_free_bytes, v.mem_free_bytes)
            + COALESCE(s.mem_reserved_bytes, v.mem_reserved_bytes, 0)
        ELSE COALESCE(s.mem_total_bytes, v.mem_total_bytes) END"""
# One statement: fill the stored rows of the batch's GPU-instants (the range bounds prune the
# partitions), record their range as raw-only (the partials written with the stored part no longer
# describe these rows: rollups near them read raw rows, ``TelemetryRawRange``), and return which
# samples were merged.
_MERGE_SQL = """
WITH merged AS (
    UPDATE fleet_telemetrysample AS s SET {assign}
    FROM unnest(%s::int8[], %s::timestamptz[], {arrays}) WITH ORDINALITY AS v(id, time, {fields}, n)
    WHERE s.accelerator_id = v.id AND s.time = v.time AND s.time >= %s AND s.time <= %s
    RETURNING v.n, s.time
),
raw AS (
    INSERT INTO fleet_telemetryrawrange (start, "end", created_at)
    SELECT min(time), max(time), now() FROM merged HAVING count(*) > 0
)
SELECT DISTINCT n FROM merged
""".format(
    assign=", ".join(
        _MERGED_TOTAL if name == "mem_total_bytes" else f"{name} = COALESCE(s.{name}, v.{name})"
        for name in SAMPLE_FIELDS
    ),
    arrays=", ".join(f"%s::{'int8' if integer else 'float4'}[]" for integer, _, _ in SAMPLE_FIELDS.values()),
    fields=", ".join(SAMPLE_FIELDS),
)


def _merge_stored(
    *, batch: TelemetryBatch, host_id: int, accelerator_ids: list[int], times: list[datetime]
) -> set[int]:
    """Fill the stored rows at the batch's GPU-instants with the batch's fields (a field a row
    has stays); return the indexes of the samples merged (the rest is to be copied)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_ADVISORY_MERGE, host_id])
        cursor.execute(
            _MERGE_SQL,
            [
                accelerator_ids,
                times,
                *(batch.columns[name] for name in SAMPLE_FIELDS),
                batch.start,
                batch.end,
            ],
        )
        return {int(row[0]) - 1 for row in cursor.fetchall()}


class StaleRegistration(Exception):
    """The fast path found the host or a GPU changed since it was cached: the caller rolls the
    transaction back and stores the batch again through the full registration."""


@dataclass
class _Registered:
    host_id: int
    digest: str
    accelerators: dict[str, int]
    expires: float


class RegistrationCache:
    """What this process last registered per (team, hostname): the host id, the digest of the
    facts and GPUs it registered, and the GPUs' ids by UUID.

    A batch with the same digest skips ``host_register`` and the ownership checks (4-8 queries);
    what could have changed since (the host moved to another team by an admin, a GPU re-seated in
    another host by another process) is confirmed by the batch's final statement, and a mismatch
    rolls the batch back and redoes it the long way. Entries live ``ttl`` seconds, so facts that
    another process changed are re-sent to the database within that time.
    """

    def __init__(self, *, ttl: float = 300.0, size: int = 50_000) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: dict[tuple[int, str], _Registered] = {}
        self._lock = threading.Lock()

    def get(self, *, team_id: int, hostname: str, digest: str) -> _Registered | None:
        entry = self._entries.get((team_id, hostname))
        if entry is None or entry.digest != digest or entry.expires < time.monotonic():
            return None
        return entry

    def put(
        self, *, team_id: int, hostname: str, digest: str, host_id: int, accelerators: dict[str, int]
    ) -> None:
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[(team_id, hostname)] = _Registered(
                host_id, digest, dict(accelerators), time.monotonic() + self.ttl
            )

    def drop(self, *, team_id: int, hostname: str) -> None:
        with self._lock:
            self._entries.pop((team_id, hostname), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


registrations = RegistrationCache()


_GPU_FIELDS = (
    "index", "name", "serial", "memory_bytes", "power_limit_w", "driver_version", "mig_mode", "parent_uuid",
    "compute_slices", "unsupported",
)  # fmt: skip
_REGISTERED_SQL = f"""
SELECT h.id, h.team_id, h.facts, {", ".join(f"h.{name}" for name in HOST_FIELDS)},
    (SELECT coalesce(json_agg(json_build_object(
        'uuid', a.uuid, 'id', a.id, 'host_id', a.host_id,
        {", ".join(f"'{name}', a.{name}" for name in _GPU_FIELDS)})), '[]')
     FROM fleet_accelerator a WHERE a.uuid = ANY(%s))
FROM fleet_host h WHERE h.hostname = %s
"""


def _registered_as_is(*, batch: TelemetryBatch, team_id: int) -> tuple[int, dict[str, int]] | None:
    """One query: the host and GPUs as the database has them. When registering the batch would
    change nothing (another process registered the same facts: the common case when this
    process has not seen the host yet), their ids; else None (``_register`` the long way).
    Mirrors ``host_register``'s comparisons."""
    uuids = [gpu["uuid"] for gpu in batch.accelerators]
    with connection.cursor() as cursor:
        cursor.execute(_REGISTERED_SQL, [uuids, batch.hostname])
        row = cursor.fetchone()
    if row is None:
        return None
    host_id, host_team, facts, *values = row
    gpus_json = values.pop()
    facts = json.loads(facts) if isinstance(facts, str) else facts  # Django reads jsonb as text
    if host_team != team_id:
        return None
    wanted = dict(batch.host_facts)
    for name, value in zip(HOST_FIELDS, values, strict=True):
        if name in wanted and wanted.pop(name) != value:
            return None
    if wanted and {**facts, **wanted} != facts:
        return None
    stored = {
        gpu["uuid"]: gpu for gpu in (json.loads(gpus_json) if isinstance(gpus_json, str) else gpus_json)
    }
    for gpu in batch.accelerators:
        have = stored.get(gpu["uuid"])
        if have is None or have["host_id"] != host_id:
            return None
        if any(gpu[name] != have[name] for name in _GPU_FIELDS if gpu.get(name) is not None):
            return None
    known = {gpu_uuid: int(gpu["id"]) for gpu_uuid, gpu in stored.items()}
    missing = set(batch.gpus) - known.keys()
    if missing:
        known.update(
            Accelerator.objects.filter(host_id=host_id, uuid__in=missing).values_list("uuid", "pk").iterator()
        )
    return host_id, known


def _register(*, batch: TelemetryBatch, team_id: int, received_at: datetime) -> tuple[int, dict[str, int]]:
    """Ownership checks, ``host_register``, the GPUs' ids by UUID; one query when nothing changed."""
    as_is = _registered_as_is(batch=batch, team_id=team_id)
    if as_is is not None:
        return as_is
    conflict = _owned_elsewhere(batch=batch, team_id=team_id)
    if conflict is not None:
        raise conflict
    host, registered = host_register(
        hostname=batch.hostname,
        team_id=team_id,
        facts=batch.host_facts,
        accelerators=batch.accelerators,
        seen_at=received_at,
    )
    if host.team_id != team_id:  # another team registered the same hostname a moment ago
        conflict = _owned_elsewhere(batch=batch, team_id=team_id)
        raise conflict or IngestRejected(
            "host name cannot be used with this token", path="host.hostname", code="host_conflict", status=409
        )
    known = {gpu_uuid: gpu.pk for gpu_uuid, gpu in registered.items()}
    missing = set(batch.gpus) - known.keys()
    if missing:
        known.update(
            Accelerator.objects.filter(host=host, uuid__in=missing).values_list("uuid", "pk").iterator()
        )
    return host.pk, known


def telemetry_batch_store(
    *,
    batch: TelemetryBatch,
    team_id: int,
    received_at: datetime,
    attribution: Attribution | None = None,
    merge: bool = False,
) -> dict[str, int]:
    """Register host and GPUs, store the attribution intervals, COPY the samples, update live
    state, mark the range dirty; return ``{"accepted": rows copied}``, with ``attribution`` and
    ``attribution_duplicates`` (``attribution_services.attribution_store``) when it is given.

    Must run inside a transaction (the caller's), after the partitions for the batch's time range
    exist. ``Host.last_seen_at`` is when the agent last reported (``received_at``), whatever the
    age of its samples; ``Accelerator.last_seen_at`` is the time of the GPU's newest sample.

    Round trips: a batch that registers what its host's previous batch registered (the agent
    repeats its facts in every batch) takes the COPY and one statement (``_FINAL_SQL``); other
    batches register first (``_register``). Raises ``StaleRegistration`` when the cached
    registration no longer holds: the caller rolls back and calls again (the cache is dropped).

    ``merge`` (Prometheus remote-write): a sample whose GPU already has a row at its instant fills
    that row's NULL fields instead of adding a row (``_merge_stored``, under a per-host lock); the
    rest is copied. Accepted counts both.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("telemetry_batch_store must run inside a transaction")
    digest = batch.registration_digest
    cached = registrations.get(team_id=team_id, hostname=batch.hostname, digest=digest)
    if cached is not None and not set(batch.gpus) <= cached.accelerators.keys():
        cached = None
    if cached is not None:
        host_id, known = cached.host_id, cached.accelerators
    else:
        host_id, known = _register(batch=batch, team_id=team_id, received_at=received_at)
    counts: dict[str, int] = {}
    # The devices the batch lists (and, for a MIG instance, its parent) whose registration this
    # transaction checked (``_register``) or, from the cache, ``_FINAL_SQL`` confirms below: the
    # attribution's device check needs no query for them. A cached registration without samples
    # has no final statement: its devices are read.
    vouched: dict[str, int] = {}
    if batch.gpus or cached is None:
        vouched = {
            gpu["uuid"]: known[gpu["uuid"]]
            for gpu in batch.accelerators
            if gpu["uuid"] in known and (not gpu.get("parent_uuid") or gpu["parent_uuid"] in known)
        }
    if attribution is not None:
        counts = {"attribution": 0, "attribution_duplicates": 0}
        if len(attribution):
            stored = attribution_store(
                attribution=attribution, team_id=team_id, host_id=host_id, registered=vouched
            )
            if stored is None:  # the host is no longer the team's
                registrations.drop(team_id=team_id, hostname=batch.hostname)
                if cached is not None:
                    raise StaleRegistration(batch.hostname)
                raise AssertionError(
                    "a host registered in this transaction is not the team's"
                )  # pragma: no cover
            counts = {"attribution": stored[0], "attribution_duplicates": stored[1]}
    if not batch.gpus:
        if cached is None:
            registrations.put(
                team_id=team_id, hostname=batch.hostname, digest=digest, host_id=host_id, accelerators=known
            )
        return {"accepted": 0, **counts}
    missing = set(batch.gpus) - known.keys()
    if missing:
        index = next(i for i, gpu in enumerate(batch.gpus) if gpu in missing)
        raise IngestRejected(
            f"GPU {batch.gpus[index]!r} is neither in this batch's accelerators nor registered on "
            f"host {batch.hostname!r}",
            path=f"samples[{index}].gpu",
            code="unknown_accelerator",
        )
    accelerator_ids = list(map(known.__getitem__, batch.gpus))
    # 1 Hz agents repeat each instant once per GPU: build each datetime once.
    stamps = {epoch: datetime.fromtimestamp(epoch, UTC) for epoch in set(batch.epochs)}
    times = list(map(stamps.__getitem__, batch.epochs))
    columns = batch.columns
    copy_ids, copy_times, merged = accelerator_ids, times, 0
    if merge:
        done = _merge_stored(batch=batch, host_id=host_id, accelerator_ids=accelerator_ids, times=times)
        if done:
            keep = [i for i in range(len(times)) if i not in done]
            copy_ids = [accelerator_ids[i] for i in keep]
            copy_times = [times[i] for i in keep]
            columns = {name: [values[i] for i in keep] for name, values in batch.columns.items()}
            merged = len(done)
    rows = zip(
        copy_times,
        repeat(host_id),
        copy_ids,
        *(columns[name] for name in SAMPLE_FIELDS),
        strict=False,
    )
    copied = telemetry_copy(rows=rows, columns=COPY_COLUMNS, partials_follow=True)
    telemetry_partials_write(host_id=host_id, accelerator_ids=copy_ids, times=copy_times, columns=columns)
    confirmed = _final_write(
        batch=batch,
        host_id=host_id,
        team_id=team_id,
        accelerator_ids=accelerator_ids,
        received_at=received_at,
        also=list(vouched.values()) if attribution is not None and cached is not None else [],
        merge=merge,
    )
    if not confirmed:
        registrations.drop(team_id=team_id, hostname=batch.hostname)
        if cached is not None:
            raise StaleRegistration(batch.hostname)
        raise AssertionError("a host registered in this transaction is not the team's")  # pragma: no cover
    if cached is None:
        registrations.put(
            team_id=team_id, hostname=batch.hostname, digest=digest, host_id=host_id, accelerators=known
        )
    return {"accepted": copied + merged, **counts}
