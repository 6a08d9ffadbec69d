"""Telemetry ingest, end to end: batches from decoded payloads to their rows and rollup marks.

``telemetry_batches_ingest`` is the one storage path, for one batch (``telemetry_batch_ingest``:
the API's ``POST /telemetry``) or several in one pass (a Prometheus remote-write request: a batch
per host, ``remote_write_services``):
1. Validate each batch (``ingest_validation.telemetry_batch_parse``), without the database.
2. Create the daily partitions the batches need, committed before their transaction
   (``partition_services.telemetry_partitions_ensure``): an empty partition is not data, and
   ``CREATE TABLE ... PARTITION OF`` would otherwise lock the parent table for the whole batch.
3. In one transaction: the idempotency claims of the batch ids, in one statement
   (``core.idempotency_services.ingest_batches_claim``: a retry of a stored batch gets its stored
   result back; a stored batch id with another body is a 409, ``idempotency_key_reused``; an
   agent's batches take their hosts' locks in the same statement and, their registration cached,
   send the stored-instants check with it: one round trip, ``_claim_lock_check``), then ``telemetry_batches_store``: per batch, refuse a host or GPU owned by another
   team and register the host and GPUs (by UUID; ``host_services``; none of it for a host this
   process registered the same way, ``RegistrationCache``); then for all the batches at once,
   binary-COPY the rows, and in one statement move each GPU's ``last_state`` to its newest sample
   (every ``LAST_STATE_SLACK``), each host's ``last_seen_at``, and mark each batch's range dirty
   for the rollups. An agent's batch leaves its partial aggregates to the drain (its mark says
   so: ``rollup_services._partials_from_marks`` computes them from the rows its transaction
   wrote); a remote-write merge appends them itself (``partition_services``), since its UPDATE
   of stored rows gives them another transaction's ``xmin``.
4. After the commit, ask for one rollup drain for the whole fleet
   (``rollup_request_services.telemetry_rollups_request``): no task per batch.
A batch may carry ``attribution`` (docs/attribution.md): its intervals are validated with the
batch (``attribution_validation``), need partitions for their days too, and are stored in the
same transaction after the registration (``attribution_services.attributions_store``); a batch
without them runs exactly the statements it ran before.
A Prometheus remote-write batch (``merge=True``) may carry the other part of a GPU-instant
already stored (Prometheus splits a scrape over several requests): under advisory locks (each
GPU's exclusive and each host's shared, all the batches', one statement:
``telemetry_merge_lock``), one statement fills the stored rows' missing fields (``_MERGE_SQL``)
and only the rest is copied; the agent's batches, always whole, only look for samples already
stored (``_stored_instants``), under their hosts' locks, exclusive.
Samples at a GPU-instant already stored (a batch sent again under a new batch id) are not stored
again (``_stored_instants``: under the same locks, one query over the batches' GPUs and
time range; a remote-write merge finds them in its own statement): each batch's answer counts
them as ``duplicate_samples``, and neither the COPY, the partials nor the rollups see them.
A cached registration that no longer holds (``StaleRegistration``) or a remembered partition that
is gone rolls the whole transaction back, and the batches are stored once more, the long way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

import numpy as np
import orjson
import psycopg
from django.db import IntegrityError, connection, transaction

from accelboard.core.choices import BatchKind
from accelboard.core.idempotency_services import (
    IdempotencyKeyReused,
    body_digest,
    ingest_batch_result_set,
    ingest_batches_claim,
    ingest_batches_claim_sql,
    ingest_batches_claimed,
)

from .attribution_services import HostAttribution, attribution_range, attributions_store
from .attribution_validation import Attribution, telemetry_batch_attribution_parse
from .host_services import HOST_FIELDS, host_register
from .ingest_validation import SAMPLE_FIELDS, IngestRejected, TelemetryBatch
from .models import Accelerator
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
    on its batch_id (``core.idempotency_services``, claimed in the batch's transaction: the same
    batch_id with another body is a 409); return ``{"batch_id", "accepted", "duplicate_samples",
    "duplicate"}`` (``accepted``: samples stored; ``duplicate_samples``: samples at a GPU-instant
    already stored, skipped),
    and ``attribution`` (intervals stored) and ``attribution_duplicates`` (intervals already stored,
    skipped) when the batch carries attribution.

    The batch's time range is marked dirty in its transaction; after the commit one rollup drain
    is asked for (``telemetry_rollups_request``, one per ``ROLLUP_INTERVAL_S`` across every web
    process). Raises ``IngestRejected`` for a batch that cannot be stored. ``merge``: samples at
    an instant its GPU already has a row at fill that row's missing fields (``telemetry_batches_store``).
    ``telemetry_batches_ingest`` of this one payload: there is one storage path.
    """
    return telemetry_batches_ingest(team_id=team_id, payloads=[payload], merge=merge)[0]


@dataclass(frozen=True)
class PreparedBatch:
    """An agent's batch validated (``telemetry_batch_prepare``), ready for
    ``telemetry_batches_ingest(prepared=...)``: what storing it needs of its payload."""

    batch: TelemetryBatch
    attribution: Attribution | None
    digest: str  # ``_batch_digest``: the claim's body digest


def telemetry_batch_prepare(*, payload: object, received_at: datetime | None = None) -> PreparedBatch:
    """Validate one agent's batch without the database (``telemetry_batch_attribution_parse``)
    and digest its body for its claim; raises ``IngestRejected`` (its 4xx) for a bad batch. What
    ``telemetry_batches_ingest`` does first for each payload, so that a caller storing several
    requests' batches together (``ingest_group``) validates each in its own request."""
    batch, attribution = telemetry_batch_attribution_parse(payload, now=received_at or datetime.now(UTC))
    return PreparedBatch(batch=batch, attribution=attribution, digest=_batch_digest(batch, payload))


def telemetry_batches_ingest(
    *,
    team_id: int,
    payloads: Sequence[object] = (),
    merge: bool = False,
    keyed_by_body: bool = False,
    locked: bool = False,
    prepared: Sequence[PreparedBatch] | None = None,
) -> list[dict[str, Any]]:
    """``telemetry_batch_ingest`` of several batches (one per host: a Prometheus remote-write
    request's) in one transaction and one pass: one claim statement for all their batch ids, one
    COPY, one partials write, one live-state statement (``telemetry_batches_store``); the results
    in ``payloads``' order, each as ``telemetry_batch_ingest`` returns it (a batch stored before is
    ``duplicate`` on its own). All or nothing: an ``IngestRejected`` of a batch (its ``index`` set
    to the payload's) stores none of them. Runs in the caller's transaction when there is one.
    ``keyed_by_body``: each batch id is already a digest of the request's body (remote-write), so
    no body digest is kept with its claim (a retry may carry other attribution, read from the
    database, and is still a retry).
    ``locked``: the caller holds the batches' merge locks in its transaction already
    (``telemetry_merge_lock``, as ``telemetry_batches_store`` would take them), so they are not
    taken again (a round trip a request).
    ``prepared``: the batches validated already (``telemetry_batch_prepare``), in place of
    ``payloads`` (agents' batches of several requests stored together, ``ingest_group``).
    """
    received_at = datetime.now(UTC)
    parsed: list[tuple[TelemetryBatch, Attribution | None]] = []
    if prepared is not None:
        parsed = [(entry.batch, entry.attribution) for entry in prepared]
    for index, payload in enumerate(payloads if prepared is None else ()):
        try:
            parsed.append(telemetry_batch_attribution_parse(payload, now=received_at))
        except IngestRejected as exc:
            exc.index = index
            raise
    # Each result is known before the write (the samples it accepts; the intervals, unless some
    # were stored already), so it is stored with the claim, saving the write its own UPDATE.
    knowns: list[dict[str, Any]] = []
    digests: list[str] = []
    # The days the samples need, and those the intervals need (each range bounded on its own:
    # the days between them, if any, are not made).
    ranges: set[tuple[datetime, datetime]] = set()
    for batch, attribution in parsed:
        known: dict[str, Any] = {
            "batch_id": batch.batch_id,
            "accepted": len(batch.gpus),
            "duplicate_samples": 0,
        }
        if prepared is not None:
            digests.append(prepared[len(knowns)].digest)
        elif not keyed_by_body:
            digests.append(_batch_digest(batch, payloads[len(knowns)]))
        if batch.start is not None and batch.end is not None:
            ranges.add((batch.start, batch.end))
        if attribution is not None:
            known.update(attribution=len(attribution), attribution_duplicates=0)
            if len(attribution):
                ranges.add(attribution_range(attribution))
        knowns.append(known)
    for attempt in (1, 2):
        for start, end in _ranges_merged(ranges):
            # Created (and committed) before the batch's transaction: an empty partition is not
            # data, and CREATE TABLE ... PARTITION OF would otherwise lock the parent table for
            # the whole batch.
            telemetry_partitions_ensure(start=start, end=end, remembered=True)
        try:
            with transaction.atomic():
                instants: _Instants | None = None
                try:
                    if merge or locked:
                        claims = ingest_batches_claim(
                            team_id=team_id,
                            kind=BatchKind.TELEMETRY,
                            client_ids=[batch.batch_id for batch, _ in parsed],
                            results=knowns,
                            digests=digests or None,
                        )
                    else:
                        claims, instants = _claim_lock_check(
                            team_id=team_id, parsed=parsed, results=knowns, digests=digests or None
                        )
                except IdempotencyKeyReused as exc:
                    rejected = idempotency_key_reused(exc, field="batch_id")
                    rejected.index = exc.index
                    raise rejected from None
                fresh = [index for index, stored in enumerate(claims) if stored is None]
                counts = telemetry_batches_store(
                    batches=[parsed[index] for index in fresh],
                    team_id=team_id,
                    received_at=received_at,
                    merge=merge,
                    indexes=fresh,
                    locked=locked or not merge,
                    instants=instants,
                )
                if any(count["accepted"] for count in counts):
                    transaction.on_commit(telemetry_rollups_request, robust=True)
                results: list[dict[str, Any]] = []
                written = dict(zip(fresh, counts, strict=True))
                firsts: dict[str, int] = {}  # each fresh batch id's index
                for index, (stored, known) in enumerate(zip(claims, knowns, strict=True)):
                    if stored is not None:
                        first = firsts.get(known["batch_id"])
                        if first is not None:  # listed before in this call: a retry of that one
                            stored = {k: v for k, v in results[first].items() if k != "duplicate"}
                        results.append({**stored, "duplicate": True})
                        continue
                    firsts[known["batch_id"]] = index
                    result = {"batch_id": known["batch_id"], **written[index]}
                    if result["accepted"] + result["duplicate_samples"] != known["accepted"]:
                        raise AssertionError(
                            f"telemetry {known['batch_id']}: wrote {result}, claimed {known}"
                        )
                    if result != known:  # some samples or intervals were stored already
                        ingest_batch_result_set(
                            team_id=team_id,
                            kind=BatchKind.TELEMETRY,
                            client_id=known["batch_id"],
                            result=result,
                        )
                    results.append({**result, "duplicate": False})
        except StaleRegistration:
            # A cached registration no longer held (dropped by the store): all rolled back;
            # the second attempt registers those hosts the long way.
            if attempt == 2:
                raise
            continue
        except IntegrityError as exc:
            # A remembered partition is gone (all rolled back): read the catalogue and go again.
            if attempt == 2 or "no partition" not in str(exc):
                raise
            telemetry_partitions_forget()
            continue
        return results
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class _Instants:
    """The stored rows (GPU id, time) of the GPUs ``ids`` over [``start``, ``end``], read under
    the batches' locks (``_claim_lock_check``): what ``_stored_instants`` would read for batches
    within them."""

    ids: frozenset[int]
    start: datetime
    end: datetime
    rows: frozenset[tuple[int, datetime]]


def _claim_lock_check(
    *,
    team_id: int,
    parsed: Sequence[tuple[TelemetryBatch, Attribution | None]],
    results: Sequence[dict[str, Any]],
    digests: Sequence[str] | None,
) -> tuple[list[dict[str, Any] | None], _Instants | None]:
    """An agent's batches' hosts' locks (as ``telemetry_batches_store`` takes them) and their
    claim (``ingest_batches_claim``) in one statement, the locks first (the claim's ``gate``:
    all taken before any id is claimed, the order remote-write's requests take them in), then,
    when every host's registration is cached (no statement of its own: the agent's steady
    state), the stored-instants check (``_STORED_INSTANTS_SQL``) over all their GPUs and times:
    two statements in one round trip (psycopg's pipeline mode). The server runs them one after
    the other, the check with a snapshot of its own, taken once the locks are held: it sees what
    a lock's last holder committed, as when it ran after the registration. The check covers
    batches the claim finds stored too, whose rows ``_stored_instants`` just does not look up."""
    client_ids = [batch.batch_id for batch, _ in parsed]
    hostnames = [batch.hostname for batch, _ in parsed if batch.gpus]
    plan = _instants_plan(team_id=team_id, parsed=parsed)
    connection.ensure_connection()
    pg = connection.connection
    # The pipeline's exit sends the statements and reads their results (psycopg syncs the
    # transaction's BEGIN on its own first: two round trips where there were four). psycopg's own
    # cursors bind on the server, so both statements are prepared once a connection (Django's
    # cursors bind on the client: each statement, its values written in, was parsed and planned
    # every time).
    with connection.wrap_database_errors, psycopg.Cursor(pg) as claim, psycopg.Cursor(pg) as check:
        with pg.pipeline():
            claim.execute(
                *ingest_batches_claim_sql(
                    team_id=team_id,
                    kind=BatchKind.TELEMETRY,
                    client_ids=client_ids,
                    results=results,
                    digests=digests,
                    gate=(_LOCK_SQL, [_ADVISORY_MERGE, _ints_literal(_merge_keys(hostnames))])
                    if hostnames
                    else None,
                ),
                prepare=True,
            )
            if plan is not None:
                check.execute(
                    _STORED_INSTANTS_SQL, [_ints_literal(sorted(plan[0])), plan[1], plan[2]], prepare=True
                )
        claimed = {row[0] for row in claim.fetchall()}
        instants = None if plan is None else _Instants(plan[0], plan[1], plan[2], frozenset(check.fetchall()))
    claims = ingest_batches_claimed(
        team_id=team_id, kind=BatchKind.TELEMETRY, client_ids=client_ids, digests=digests, claimed=claimed
    )
    return claims, instants


def _instants_plan(
    *, team_id: int, parsed: Sequence[tuple[TelemetryBatch, Attribution | None]]
) -> tuple[frozenset[int], datetime, datetime] | None:
    """The GPU ids and time range the stored-instants check of these batches covers, when each
    batch with samples has its host's registration cached (``_batch_register`` will find the
    same); else None (the check runs after the registration)."""
    ids: set[int] = set()
    first = last = None
    for batch, _ in parsed:
        if not batch.gpus:
            continue
        cached = registrations.get(team_id=team_id, hostname=batch.hostname, parts=_registration_parts(batch))
        if cached is None:
            return None
        try:
            ids.update(map(cached.accelerators.__getitem__, set(batch.gpus)))
        except KeyError:
            return None
        low, high = min(batch.epochs), max(batch.epochs)
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
    if first is None or last is None:
        return None
    return frozenset(ids), datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC)


def _batch_digest(batch: TelemetryBatch, payload: object) -> str:
    """The batch's body as validated (``body_digest``), its id left out: times as epoch seconds
    whichever way they were written, samples as columns (serializing columns of numbers costs
    half of serializing the samples' objects with sorted keys, for the same content)."""
    attribution = payload.get("attribution") if isinstance(payload, dict) else None
    return body_digest(
        [
            batch.hostname,
            batch.host_facts,
            batch.accelerators,
            batch.gpus,
            batch.epochs,
            batch.columns,
            attribution,
        ]
    )


def idempotency_key_reused(exc: IdempotencyKeyReused, *, field: str) -> IngestRejected:
    """The 409 for a client id sent again with another body (``IdempotencyKeyReused``), naming
    the key and its field, as every ingest endpoint answers it."""
    return IngestRejected(
        f"{field} {exc.client_id!r} was already used for a write with another body: a retry must "
        f"send the same body; new data needs a new {field}",
        path=field,
        code="idempotency_key_reused",
        status=409,
    )


def _ranges_merged(ranges: set[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """The ranges, overlapping ones (a request's hosts: the same scrape times) made one."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _gpus_elsewhere(*, batch: TelemetryBatch, team_id: int) -> IngestRejected | None:
    """A GPU of the batch on another team's host (a 409). Host names are not checked: they resolve
    within the token's team, so another team's host of the same name is no conflict, and the
    answer is the one a name nobody uses gets."""
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


# A host's ``last_seen_at`` is rewritten only once it is this much older than a report: the column
# is indexed, so each rewrite is a new row version in all six of ``fleet_host``'s indexes (about
# 0.1 ms of PostgreSQL CPU of the ~1 ms statement below, docs/scaling.md); a host counts as stale
# only after minutes (``selectors.stale_after``, at least ``HOST_STALE_SECONDS``).
HOST_SEEN_SLACK = timedelta(seconds=30)
# A GPU's ``last_state`` (and its ``last_seen_at``) moves to a batch's newest sample only once the
# stored one is this much older (an agent's batch; a remote-write merge writes whenever its state
# is as new): each write is a new jsonb row version of the GPU, eight a batch (0.28 ms of the
# final statement's PostgreSQL CPU, docs/scaling.md). So the live grid shows each GPU's sample
# at most this much older than its newest stored one (every third 10 s batch writes it); a GPU
# counts as stale only after minutes (``selectors.stale_after``), like its host.
LAST_STATE_SLACK = timedelta(seconds=30)

# One statement after the COPY, for every batch of the call: each GPU's ``last_state`` moves to
# its newest sample of the batch (unless it has one less than ``LAST_STATE_SLACK`` older), each host's ``last_seen_at`` to the
# time of the request (unless it is less than ``HOST_SEEN_SLACK`` older), and each batch's range is marked dirty for the rollups (a merged batch's
# ``last_state`` adds its fields to a state of the same instant instead of replacing it). It
# returns what the fast path must confirm: the hosts that are not the token's team's, and those
# with a GPU of their batch no longer on them.
_FINAL_SQL = """
WITH dirty AS (
    INSERT INTO fleet_telemetrydirtyrange (start, "end", host_id, created_at, partials_pending)
    SELECT d.start, d.end, d.host_id, now(), {pending}
    FROM unnest(%s::timestamptz[], %s::timestamptz[], %s::int8[]) AS d(start, "end", host_id)
),
host AS (
    UPDATE fleet_host SET last_seen_at = %s
    WHERE id = ANY(%s::int8[]) AND team_id = %s AND (last_seen_at IS NULL OR last_seen_at < %s){skip}
    RETURNING id
),
state AS (
    UPDATE fleet_accelerator AS a
    SET last_state = {state}, last_seen_at = v.seen
    FROM unnest(%s::int8[], %b::text[], %s::timestamptz[]) AS v(id, state, seen)
    WHERE a.id = v.id
      AND (a.last_state->>'time' IS NULL OR (a.last_state->>'time')::timestamptz <= v.seen{state_slack})
    RETURNING a.id
)
SELECT
    ARRAY(SELECT h FROM unnest(%s::int8[]) AS h
          WHERE NOT EXISTS (SELECT 1 FROM fleet_host WHERE id = h AND team_id = %s)),
    ARRAY(SELECT DISTINCT p.host_id FROM unnest(%s::int8[], %s::int8[]) AS p(host_id, id)
          WHERE NOT EXISTS (SELECT 1 FROM fleet_accelerator WHERE id = p.id AND host_id = p.host_id)),
    ARRAY(SELECT id FROM host),
    ARRAY(SELECT id FROM state)
"""

_MERGED = "(a.last_state || v.state::jsonb)"
# The merged state's memory total, as ``_MERGED_TOTAL`` computes the row's.
_MERGED_STATE = f"""CASE WHEN (a.last_state->>'time')::timestamptz = v.seen
        THEN {_MERGED} || CASE WHEN {_MERGED} ? 'mem_used_bytes' AND {_MERGED} ? 'mem_free_bytes'
            THEN jsonb_build_object('mem_total_bytes', ({_MERGED}->>'mem_used_bytes')::bigint
                + ({_MERGED}->>'mem_free_bytes')::bigint
                + coalesce(({_MERGED}->>'mem_reserved_bytes')::bigint, 0))
            ELSE '{{}}'::jsonb END
        ELSE v.state::jsonb END"""
_FINAL_SQL_REPLACE = _FINAL_SQL.format(
    state="v.state::jsonb",
    skip="",
    # The drain computes the batches' partials from the rows this transaction wrote.
    pending="true",
    state_slack=f" - interval '{int(LAST_STATE_SLACK.total_seconds())} seconds'",
)
# A remote-write request leaves a host's ``last_seen_at`` to another request updating it now
# (whose time is as recent): its row lock, held to that request's commit, would make every
# request of the host wait for the one before it (Prometheus's shards each carry every host).
_FINAL_SQL_MERGE = _FINAL_SQL.format(
    state=_MERGED_STATE,
    skip="""
      AND id IN (SELECT id FROM fleet_host WHERE id = ANY(%s::int8[])
                 AND (last_seen_at IS NULL OR last_seen_at < %s) FOR UPDATE SKIP LOCKED)""",
    # A merged state adds fields to the state of its instant: written whenever it is as new.
    state_slack="",
    # Its partials are written with its rows (an UPDATE of merged rows changes their xmin).
    pending="false",
)


def _execute(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Run ``sql`` with server-side binding, prepared once per connection: its arrays travel as
    they are (Django's cursors bind on the client, quoting each element of a text array; a ``%b``
    parameter travels in binary, unquoted), and parsing and planning it cost more server CPU than
    running it."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchall()


def _ints_literal(values: Iterable[int]) -> str:
    """An integer array parameter (``int8[]``, ``int4[]``) as PostgreSQL's array literal:
    psycopg dumps a list's elements one by one in Python (about a third of the final
    statement's web CPU, docs/scaling.md); the server reads the same array from either."""
    return "{" + ",".join(map(str, values)) + "}"


def _times_literal(values: Iterable[datetime | None]) -> str:
    """A ``timestamptz[]`` parameter as an array literal (``_ints_literal``): each aware datetime
    in ISO 8601 with its offset and microseconds, read back exactly; None as NULL."""
    return "{" + ",".join("NULL" if value is None else value.isoformat() for value in values) + "}"


@dataclass
class _Stored:
    """One batch of a ``telemetry_batches_store`` call, registered: what the one-pass write needs."""

    batch: TelemetryBatch
    host_id: int
    accelerator_ids: list[int]  # per sample
    times: list[datetime]  # per sample
    known: dict[str, int]  # the host's GPUs' ids by UUID
    parts: frozenset[bytes]  # what it registers (``_registration_parts``)
    unchanged: bool  # registering it changed nothing (``RegistrationCache.put``)
    cached: bool
    also: list[int]  # devices without samples whose registration the final statement confirms


def _final_write(*, stored: list[_Stored], team_id: int, received_at: datetime, merge: bool) -> set[int]:
    """Run ``_FINAL_SQL`` for ``stored``; return the ids of the hosts that did not hold (not the
    team's, or a GPU of the batch not on it: those of the samples and ``also``)."""
    starts, ends, hosts = [], [], []
    state_ids: list[int] = []
    states: list[str] = []
    seens: list[datetime] = []
    pair_hosts: list[int] = []
    pair_ids: list[int] = []
    cutoff = received_at - HOST_SEEN_SLACK
    for entry in stored:
        batch = entry.batch
        starts.append(batch.start)
        ends.append(batch.end)
        hosts.append(entry.host_id)
        codes = np.fromiter(entry.accelerator_ids, dtype=np.int64, count=len(entry.accelerator_ids))
        epochs = np.fromiter(batch.epochs, dtype=np.float64, count=len(batch.epochs))
        order = np.lexsort((epochs, codes))
        sorted_codes = codes[order]
        newest = order[np.r_[sorted_codes[1:] != sorted_codes[:-1], True]]
        for index in newest.tolist():
            seen = entry.times[index]
            if not merge and _written.state_fresh(entry.accelerator_ids[index], seen - LAST_STATE_SLACK):
                continue  # the statement would not write it
            state = {**batch.samples[index], "time": seen.isoformat()}
            if merge:
                state = {name: value for name, value in state.items() if value is not None}
            state_ids.append(entry.accelerator_ids[index])
            states.append(orjson.dumps(state).decode())
            seens.append(seen)
        distinct = sorted({*entry.accelerator_ids, *entry.also})
        pair_hosts.extend(repeat(entry.host_id, len(distinct)))
        pair_ids.extend(distinct)
    seen_hosts = hosts if merge else [host for host in hosts if not _written.host_fresh(host, cutoff)]
    [(foreign, moved, hosts_written, states_written)] = _execute(
        _FINAL_SQL_MERGE if merge else _FINAL_SQL_REPLACE,
        [
            _times_literal(starts), _times_literal(ends), _ints_literal(hosts),
            received_at, _ints_literal(seen_hosts), team_id, cutoff,
            *([_ints_literal(hosts), cutoff] if merge else []),
            _ints_literal(state_ids), states, _times_literal(seens),
            _ints_literal(hosts), team_id,
            _ints_literal(pair_hosts), _ints_literal(pair_ids),
        ],
    )  # fmt: skip
    if hosts_written or states_written:
        written_seen = dict(zip(state_ids, seens, strict=True))
        transaction.on_commit(
            functools.partial(
                _written.note,
                hosts={host: received_at for host in hosts_written},
                states={gpu: written_seen[gpu] for gpu in states_written},
            )
        )
    return {*foreign, *moved}


class _Written:
    """What this process's committed final statements wrote: each host's ``last_seen_at`` and each
    GPU's ``last_state`` time. The stored values only move forward (each write's condition), so
    one noted here less than the slack old means the statement would write nothing for it: it is
    left out of the statement's arrays (a batch within the slack of its host's last write in this
    process updates no row; one whose last write was another process's sends it, as before)."""

    def __init__(self, *, size: int = 200_000) -> None:
        self._hosts: dict[int, datetime] = {}
        self._states: dict[int, datetime] = {}
        self._size = size

    def host_fresh(self, host_id: int, cutoff: datetime) -> bool:
        """The host's ``last_seen_at`` is known to be at or after ``cutoff`` (not rewritten)."""
        noted = self._hosts.get(host_id)
        return noted is not None and noted >= cutoff

    def state_fresh(self, accelerator_id: int, cutoff: datetime) -> bool:
        """The GPU's ``last_state`` time is known to be after ``cutoff`` (not rewritten)."""
        noted = self._states.get(accelerator_id)
        return noted is not None and noted > cutoff

    def note(self, *, hosts: Mapping[int, datetime], states: Mapping[int, datetime]) -> None:
        if len(self._hosts) + len(hosts) > self._size or len(self._states) + len(states) > self._size:
            self.clear()
        self._hosts.update(hosts)
        self._states.update(states)

    def clear(self) -> None:
        self._hosts.clear()
        self._states.clear()


_written = _Written()


# Remote-write merge (``telemetry_batches_store(merge=True)``), and the agent's duplicate check
# (``_stored_instants``). Two requests of one host merging (or checking) at once would both miss
# the other's uncommitted rows and both insert: advisory locks serialize them, taken before
# anything else of the call (so the merge's snapshot sees what the lock's holder committed, and no
# request holds a row another waits for while it waits for a lock), all in one statement, in key
# order (no deadlock between two requests carrying the same hosts). An agent's batch takes its
# host's lock (by name) exclusive. A remote-write merge takes the host's lock shared and each of
# its GPUs' (``_ADVISORY_MERGE_GPU``; a MIG instance's is its GPU's) exclusive: Prometheus's
# shards each carry a slice of every host, mostly of other GPUs (a series goes to the shard of its
# series id), so requests of one host with other GPUs no longer wait for each other (with the
# host's lock exclusive, 4 shards' requests went one at a time, 2026-12-07), two carrying one GPU
# still do, and an agent's batch of the host still excludes them all. Only the exclusive locks
# can be waited for in a cycle, and they are taken in key order.
_ADVISORY_MERGE = 7_310_003
_ADVISORY_MERGE_GPU = 7_310_004
_LOCK_SQL = "SELECT count(pg_advisory_xact_lock(%s, k)) FROM unnest(%s::int4[]) WITH ORDINALITY AS u(k, n)"
_LOCK_GPUS_SQL = """
SELECT (SELECT count(pg_advisory_xact_lock_shared(%s, k)) FROM unnest(%s::int4[]) WITH ORDINALITY AS u(k, n)),
       (SELECT count(pg_advisory_xact_lock(%s, k)) FROM unnest(%s::int4[]) WITH ORDINALITY AS u(k, n))
"""


def _merge_keys(hostnames: Iterable[str]) -> list[int]:
    """The merge locks' keys (signed 32-bit, from the host names or GPU UUIDs), sorted, each once."""
    return sorted(
        {
            int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big", signed=True)
            for name in hostnames
        }
    )


def merge_lock_devices(*, gpus: Iterable[str], accelerators: Iterable[Mapping[str, Any]]) -> set[str]:
    """The GPUs whose merge locks samples of ``gpus`` take: a MIG instance listed in
    ``accelerators`` with its ``parent_uuid`` takes its GPU's (its intervals are checked against
    the GPU's)."""
    parents = {gpu["uuid"]: gpu.get("parent_uuid") for gpu in accelerators}
    return {parents.get(uuid) or uuid for uuid in gpus}


def telemetry_merge_lock(*, hostnames: Iterable[str], devices: Iterable[str] | None = None) -> None:
    """Take the merge locks (above) for the caller's transaction: each host's exclusive when
    ``devices`` is None (the agent's batches), else each host's shared and each of ``devices``'
    exclusive (``merge_lock_devices``; a remote-write request). A lock held already is taken
    again at no cost (advisory locks are re-entrant)."""
    with connection.cursor() as cursor:
        if devices is None:
            cursor.execute(_LOCK_SQL, [_ADVISORY_MERGE, _merge_keys(hostnames)])
        else:
            cursor.execute(
                _LOCK_GPUS_SQL,
                [_ADVISORY_MERGE, _merge_keys(hostnames), _ADVISORY_MERGE_GPU, _merge_keys(devices)],
            )


# dcgm-exporter's framebuffer parts may come in different requests: once the merged row has both
# used and free, its total is their sum with the reserved part (when known), whichever request
# brought which (the mapping computes the same when they come together); else as any field.
_MERGED_TOTAL = """mem_total_bytes = CASE
        WHEN COALESCE(s.mem_used_bytes, v.mem_used_bytes) IS NOT NULL
            AND COALESCE(s.mem_free_bytes, v.mem_free_bytes) IS NOT NULL
        THEN COALESCE(s.mem_used_bytes, v.mem_used_bytes) + COALESCE(s.mem_free_bytes, v.mem_free_bytes)
            + COALESCE(s.mem_reserved_bytes, v.mem_reserved_bytes, 0)
        ELSE COALESCE(s.mem_total_bytes, v.mem_total_bytes) END"""
# One statement: fill the stored rows of the batches' GPU-instants where the sample brings a field
# the row lacks (the range bounds prune the partitions; ``accelerator_id = ANY`` of the request's
# GPUs, the same rows, lets each join read them by the (accelerator_id, time) index where the
# planner hash-joined a scan of the day's partition: 1.8 → 0.9 ms, docs/scaling.md), record their range as raw-only (the
# partials written with the stored part no longer describe these rows: rollups near them read raw
# rows, ``TelemetryRawRange``), and return which samples were merged (true) and which brought
# nothing the stored row lacks (false: duplicates, a request sent again; no write, no raw range).
# Both parts read the statement's snapshot, before the update.
_MERGE_SQL = """
WITH v AS MATERIALIZED (
    SELECT * FROM unnest(%b::int8[], %b::timestamptz[], {arrays}) WITH ORDINALITY AS v(id, time, {fields}, n)
),
merged AS (
    UPDATE fleet_telemetrysample AS s SET {assign}
    FROM v
    WHERE s.accelerator_id = v.id AND s.time = v.time AND s.time >= %s AND s.time <= %s
      AND s.accelerator_id = ANY(%b::int8[]) AND ({fills})
    RETURNING v.n, s.time
),
raw AS (
    INSERT INTO fleet_telemetryrawrange (start, "end", created_at)
    SELECT min(time), max(time), now() FROM merged HAVING count(*) > 0
)
SELECT DISTINCT n, true FROM merged
UNION ALL
SELECT DISTINCT v.n, false FROM v JOIN fleet_telemetrysample AS s
    ON s.accelerator_id = v.id AND s.time = v.time AND s.time >= %s AND s.time <= %s
    AND s.accelerator_id = ANY(%b::int8[])
WHERE NOT ({fills})
"""
# Which of the samples' GPU-instants have a stored row (``_merge_stored``'s probe): the merge
# statement's join alone.
_MERGE_PROBE_SQL = """
SELECT v.n FROM unnest(%b::int8[], %b::timestamptz[]) WITH ORDINALITY AS v(id, time, n)
JOIN fleet_telemetrysample AS s
    ON s.accelerator_id = v.id AND s.time = v.time AND s.time >= %s AND s.time <= %s
    AND s.accelerator_id = ANY(%b::int8[])
"""
# The framebuffer's parts and total go together: the total's assignment reads all four.
_MEMORY_FIELDS = ("mem_used_bytes", "mem_total_bytes", "mem_free_bytes", "mem_reserved_bytes")


@functools.lru_cache(maxsize=64)
def _merge_sql(fields: tuple[str, ...]) -> str:
    """``_MERGE_SQL`` for the fields some sample of the batches carries: a field none carries
    changes no stored row (``COALESCE(s.x, NULL)``), and leaving it out spares its array (a
    remote-write request carries about half the fields; psycopg writes each array in Python)."""
    return _MERGE_SQL.format(
        assign=", ".join(
            _MERGED_TOTAL if name == "mem_total_bytes" else f"{name} = COALESCE(s.{name}, v.{name})"
            for name in fields
        ),
        arrays=", ".join(f"%b::{'int8' if SAMPLE_FIELDS[name][0] else 'float4'}[]" for name in fields),
        fields=", ".join(fields),
        fills=" OR ".join(f"(s.{name} IS NULL AND v.{name} IS NOT NULL)" for name in fields),
    )


def _merge_stored(
    *, accelerator_ids: list[int], times: list[datetime], columns: Mapping[str, list[Any]]
) -> tuple[set[int], set[int]]:
    """Fill the stored rows at the samples' GPU-instants with their fields (a field a row has
    stays); return the indexes of the samples merged and of those whose fields the stored row
    had all (duplicates); the rest is to be copied."""
    carried = {name for name in SAMPLE_FIELDS if any(value is not None for value in columns[name])}
    if carried & set(_MEMORY_FIELDS):
        carried.update(_MEMORY_FIELDS)
    # At least one field, so that a stored instant is still found (and not copied a second time).
    fields = tuple(name for name in SAMPLE_FIELDS if name in carried) or ("power_w",)
    start, end = min(times), max(times)
    # The arrays travel in binary (``%b``): psycopg writes a text array element by element in
    # Python, quoting each (~6x the client CPU); each holds one Python type, as the binary dumper
    # wants (an integral float sent as an int, say, would not).
    arrays = [
        [
            None if value is None else (int(value) if SAMPLE_FIELDS[name][0] else float(value))
            for value in columns[name]
        ]
        for name in fields
    ]
    gpus = sorted(set(accelerator_ids))
    # Most of a request's GPU-instants have no stored row (the probe: one join of two arrays);
    # the merge statement then runs for those that have one only, its arrays cut to them (the
    # same statement, each of its rows' outcomes its own: a row of ``v`` without a stored row
    # joins nothing in either part).
    hits = sorted(
        int(n) - 1 for (n,) in _execute(_MERGE_PROBE_SQL, [accelerator_ids, times, start, end, gpus])
    )
    if not hits:
        return set(), set()
    if len(hits) < len(accelerator_ids):
        accelerator_ids = [accelerator_ids[i] for i in hits]
        times = [times[i] for i in hits]
        arrays = [[values[i] for i in hits] for values in arrays]
        gpus = sorted(set(accelerator_ids))
    else:
        hits = list(range(len(accelerator_ids)))
    rows = _execute(_merge_sql(fields), [accelerator_ids, times, *arrays, start, end, gpus, start, end, gpus])
    merged = {hits[int(n) - 1] for n, filled in rows if filled}
    return merged, {hits[int(n) - 1] for n, filled in rows if not filled}


class StaleRegistration(Exception):
    """The fast path found the host or a GPU changed since it was cached: the caller rolls the
    transaction back and stores the batch again through the full registration."""


@dataclass
class _Registered:
    host_id: int
    parts: frozenset[bytes]
    accelerators: dict[str, int]
    expires: float


# Parts kept per host (``_registration_parts``): its facts and GPUs, as registered by its batches.
PARTS_KEPT = 1_024


def _registration_parts(batch: TelemetryBatch) -> frozenset[bytes]:
    """What the batch registers, in parts: its host facts, and each GPU. A remote-write request
    carries a slice of a host's series (Prometheus's shards), so each request registers another
    subset of the host's GPUs: one registered before in parts needs no registration either."""
    try:
        return frozenset(
            [
                orjson.dumps({"host": batch.host_facts}, option=orjson.OPT_SORT_KEYS),
                *(orjson.dumps(gpu, option=orjson.OPT_SORT_KEYS) for gpu in batch.accelerators),
            ]
        )
    except TypeError:  # an integer beyond 64 bits in the facts: the batch as a whole
        return frozenset([batch.registration_digest.encode()])


class RegistrationCache:
    """What this process last registered per (team, hostname): the host id, the facts and GPUs it
    registered (``_registration_parts``; those of several batches while the later ones changed
    nothing), and the GPUs' ids by UUID.

    A batch registering nothing else skips ``host_register`` and the ownership checks (4-8 queries);
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

    def get(self, *, team_id: int, hostname: str, parts: frozenset[bytes]) -> _Registered | None:
        entry = self._entries.get((team_id, hostname))
        if entry is None or not parts <= entry.parts or entry.expires < time.monotonic():
            return None
        return entry

    def put(
        self,
        *,
        team_id: int,
        hostname: str,
        parts: frozenset[bytes],
        host_id: int,
        accelerators: dict[str, int],
        unchanged: bool = False,
    ) -> None:
        """``unchanged``: registering ``parts`` changed nothing in the database, so the parts
        kept for the host (unexpired, same host id) stay good beside them."""
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            entry = self._entries.get((team_id, hostname))
            now = time.monotonic()
            if unchanged and entry is not None and entry.host_id == host_id and entry.expires >= now:
                kept = entry.parts | parts
                if len(kept) <= PARTS_KEPT:
                    self._entries[(team_id, hostname)] = _Registered(
                        host_id, kept, {**entry.accelerators, **accelerators}, entry.expires
                    )
                    return
            self._entries[(team_id, hostname)] = _Registered(
                host_id, parts, dict(accelerators), now + self.ttl
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
FROM fleet_host h WHERE h.hostname = %s AND h.team_id = %s
"""


def _registered_as_is(*, batch: TelemetryBatch, team_id: int) -> tuple[int, dict[str, int]] | None:
    """One query: the host and GPUs as the database has them. When registering the batch would
    change nothing (another process registered the same facts: the common case when this
    process has not seen the host yet), their ids; else None (``_register`` the long way).
    Mirrors ``host_register``'s comparisons."""
    uuids = [gpu["uuid"] for gpu in batch.accelerators]
    with connection.cursor() as cursor:
        cursor.execute(_REGISTERED_SQL, [uuids, batch.hostname, team_id])
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


def _register(
    *, batch: TelemetryBatch, team_id: int, received_at: datetime
) -> tuple[int, dict[str, int], bool]:
    """Ownership checks, ``host_register``, the GPUs' ids by UUID, and whether nothing changed
    (then it took one query)."""
    as_is = _registered_as_is(batch=batch, team_id=team_id)
    if as_is is not None:
        return *as_is, True
    conflict = _gpus_elsewhere(batch=batch, team_id=team_id)
    if conflict is not None:
        raise conflict
    host, registered = host_register(
        hostname=batch.hostname,
        team_id=team_id,
        facts=batch.host_facts,
        accelerators=batch.accelerators,
        seen_at=received_at,
    )
    known = {gpu_uuid: gpu.pk for gpu_uuid, gpu in registered.items()}
    missing = set(batch.gpus) - known.keys()
    if missing:
        known.update(
            Accelerator.objects.filter(host=host, uuid__in=missing).values_list("uuid", "pk").iterator()
        )
    return host.pk, known, False


def telemetry_batches_store(
    *,
    batches: Sequence[tuple[TelemetryBatch, Attribution | None]],
    team_id: int,
    received_at: datetime,
    merge: bool = False,
    indexes: Sequence[int] | None = None,
    locked: bool = False,
    instants: _Instants | None = None,
) -> list[dict[str, int]]:
    """Register each batch's host and GPUs, store its attribution intervals, then for all the
    batches at once: COPY the samples, write their partials, update live state and mark the ranges
    dirty; return per batch ``{"accepted": rows stored, "duplicate_samples": samples skipped}``
    (a sample at a GPU-instant already stored, or listed before in the batch), with ``attribution`` and
    ``attribution_duplicates`` (``attribution_services.attributions_store``) when it carries them,
    all the batches' intervals stored at once (``attributions_store``).

    Must run inside a transaction (the caller's), after the partitions for the batches' time
    ranges exist. ``Host.last_seen_at`` is when the host last reported (``received_at``), whatever
    the age of its samples; ``Accelerator.last_seen_at`` is the time of the GPU's newest sample.

    Round trips: a batch that registers what its host's previous batch registered (the agent
    repeats its facts in every batch; Prometheus's series name the same GPUs) costs none of its
    own: all the batches take the COPY, the partials write and one statement (``_FINAL_SQL``);
    other batches register first (``_register``, in host-name order). Raises
    ``StaleRegistration`` when a cached registration no longer holds: the caller rolls back and
    calls again (those hosts' cache entries are dropped).

    ``merge`` (Prometheus remote-write): a sample whose GPU already has a row at its instant fills
    that row's NULL fields instead of adding a row (``_merge_stored``: one statement for all the
    batches, under the batches' host locks, ``_LOCK_SQL``); the rest is copied. Accepted counts both;
    a sample whose fields the stored row has all already is a duplicate. Without ``merge``, any
    sample at a stored GPU-instant is one (``_stored_instants``, under the same locks).
    ``indexes``: each batch's index for an ``IngestRejected`` (default: its position).
    ``locked``: the caller took those locks already (``telemetry_batches_ingest``).
    ``instants``: the stored-instants check's rows, read under those locks (``_claim_lock_check``).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("telemetry_batches_store must run inside a transaction")
    positions = list(indexes) if indexes is not None else list(range(len(batches)))
    if not locked and any(batch.gpus for batch, _ in batches):
        telemetry_merge_lock(
            hostnames=[batch.hostname for batch, _ in batches if batch.gpus],
            devices={
                device
                for batch, _ in batches
                for device in merge_lock_devices(gpus=batch.gpus, accelerators=batch.accelerators)
            }
            if merge
            else None,
        )
    results: list[dict[str, int]] = [{"accepted": 0, "duplicate_samples": 0} for _ in batches]
    stored: list[_Stored] = []
    slots: list[int] = []  # each stored entry's batch
    intervals: list[tuple[int, _Registration]] = []
    # Registration in host-name order (the rows it locks, in one order in every transaction).
    for slot in sorted(range(len(batches)), key=lambda n: batches[n][0].hostname):
        batch, attribution = batches[slot]
        try:
            registration = _batch_register(
                batch=batch, attribution=attribution, team_id=team_id, received_at=received_at
            )
        except IngestRejected as exc:
            exc.index = positions[slot]
            raise
        results[slot] = {"accepted": len(batch.gpus), "duplicate_samples": 0, **registration.counts}
        if registration.stored is not None:
            stored.append(registration.stored)
            slots.append(slot)
        if registration.attribution is not None:
            intervals.append((slot, registration))
    if intervals:
        _intervals_store(
            intervals=intervals,
            batches=batches,
            results=results,
            positions=positions,
            team_id=team_id,
            # Remote-write: the intervals are of the batch's own GPUs, whose locks are held.
            shared=merge and all(batches[slot][0].gpus for slot, _ in intervals),
        )
    if not stored:
        return results
    host_of_row: list[int] = []
    ids: list[int] = []
    times: list[datetime] = []
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_FIELDS}
    for entry in stored:
        host_of_row.extend(repeat(entry.host_id, len(entry.times)))
        ids.extend(entry.accelerator_ids)
        times.extend(entry.times)
        for name in SAMPLE_FIELDS:
            columns[name].extend(entry.batch.columns[name])
    total, done = len(ids), set[int]()
    if merge:
        done, duplicates = _merge_stored(accelerator_ids=ids, times=times, columns=columns)
    else:
        duplicates = _stored_instants(stored=stored, accelerator_ids=ids, times=times, instants=instants)
    if duplicates:
        _duplicates_count(stored=stored, slots=slots, duplicates=duplicates, results=results)
    if done or duplicates:
        keep = [i for i in range(len(times)) if i not in done and i not in duplicates]
        host_of_row = [host_of_row[i] for i in keep]
        ids = [ids[i] for i in keep]
        times = [times[i] for i in keep]
        columns = {name: [values[i] for i in keep] for name, values in columns.items()}
    rows = zip(times, host_of_row, ids, *(columns[name] for name in SAMPLE_FIELDS), strict=True)
    copied = telemetry_copy(rows=rows, columns=COPY_COLUMNS, partials_follow=True)
    if copied + len(done) + len(duplicates) != total:
        raise AssertionError(
            f"telemetry: stored {copied} + merged {len(done)} + duplicates {len(duplicates)} of {total} samples"
        )
    if merge:
        # A merge's partials go with its rows; an agent's batch leaves them to the drain (its
        # mark carries the transaction's id: ``rollup_services._partials_from_marks``), off the
        # request's path (1.2 ms of the request's CPU in all, docs/scaling.md).
        telemetry_partials_write(
            host_id=stored[0].host_id if len(stored) == 1 else host_of_row,
            accelerator_ids=ids,
            times=times,
            columns=columns,
        )
    failed = _final_write(stored=stored, team_id=team_id, received_at=received_at, merge=merge)
    if failed:
        stale = False
        for entry in stored:
            if entry.host_id in failed:
                registrations.drop(team_id=team_id, hostname=entry.batch.hostname)
                stale = stale or entry.cached
        if stale:
            raise StaleRegistration(", ".join(e.batch.hostname for e in stored if e.host_id in failed))
        raise AssertionError("a host registered in this transaction is not the team's")  # pragma: no cover
    for entry in stored:
        if not entry.cached:
            registrations.put(
                team_id=team_id,
                hostname=entry.batch.hostname,
                parts=entry.parts,
                host_id=entry.host_id,
                accelerators=entry.known,
                unchanged=entry.unchanged,
            )
    return results


# The stored rows of the batches' GPUs over the batches' time range: one index range scan per GPU
# (``fleet_telemetrysample_gpu_time``), the bounds pruning the partitions. A batch of new data
# (the agent's next 5 s) finds none, at the cost of one round trip; a batch sent again finds its
# own rows.
_STORED_INSTANTS_SQL = """
SELECT accelerator_id, time FROM fleet_telemetrysample
WHERE accelerator_id = ANY(%s::int8[]) AND time >= %s AND time <= %s
"""


def _stored_instants(
    *,
    stored: list[_Stored],
    accelerator_ids: list[int],
    times: list[datetime],
    instants: _Instants | None = None,
) -> set[int]:
    """The indexes of the samples that are not to be stored: at a GPU-instant with a stored row
    (one query for all the batches, ``_STORED_INSTANTS_SQL``, unless ``instants`` read it already
    for these GPUs and times), or at one an earlier sample of the call has. Run under the
    batches' host locks, so a concurrent copy of the same samples is seen."""
    codes = np.fromiter(accelerator_ids, dtype=np.int64, count=len(accelerator_ids))
    epochs = np.concatenate([np.asarray(entry.batch.epochs, dtype=np.float64) for entry in stored])
    order = np.lexsort((epochs, codes))
    repeated = (codes[order][1:] == codes[order][:-1]) & (epochs[order][1:] == epochs[order][:-1])
    duplicates = set(order[1:][repeated].tolist()) if repeated.any() else set()
    gpus, start, end = set(accelerator_ids), min(times), max(times)
    if instants is not None and gpus <= instants.ids and instants.start <= start and end <= instants.end:
        rows: Iterable[tuple[Any, ...]] = instants.rows
    else:
        rows = _execute(_STORED_INSTANTS_SQL, [_ints_literal(sorted(gpus)), start, end])
    if rows:
        have = set(rows)
        duplicates.update(i for i, key in enumerate(zip(accelerator_ids, times, strict=True)) if key in have)
    return duplicates


def _duplicates_count(
    *, stored: list[_Stored], slots: list[int], duplicates: set[int], results: list[dict[str, int]]
) -> None:
    """Move each duplicate sample of ``results`` from its batch's ``accepted`` to its
    ``duplicate_samples``."""
    ends = np.cumsum([len(entry.times) for entry in stored])
    owners = np.searchsorted(
        ends, np.fromiter(duplicates, dtype=np.int64, count=len(duplicates)), side="right"
    )
    for entry, count in zip(*np.unique(owners, return_counts=True), strict=True):
        slot = slots[int(entry)]
        results[slot]["accepted"] -= int(count)
        results[slot]["duplicate_samples"] += int(count)


def _intervals_store(
    *,
    intervals: list[tuple[int, _Registration]],
    batches: Sequence[tuple[TelemetryBatch, Attribution | None]],
    results: list[dict[str, int]],
    positions: list[int],
    team_id: int,
    shared: bool = False,
) -> None:
    """The batches' attribution intervals, all in one ``attributions_store`` (a handful of
    statements for a request of hundreds of hosts, not a handful per host); each batch's counts
    into ``results``."""
    items = [registration.attribution for _, registration in intervals]
    try:
        written = attributions_store(
            items=[item for item in items if item is not None], team_id=team_id, shared=shared
        )
    except IngestRejected as exc:
        if exc.index is not None:
            exc.index = positions[intervals[exc.index][0]]
        raise
    for (slot, registration), answer in zip(intervals, written, strict=True):
        hostname = batches[slot][0].hostname
        if answer is None:  # the host is no longer the team's
            registrations.drop(team_id=team_id, hostname=hostname)
            if registration.cached:
                raise StaleRegistration(hostname)
            raise AssertionError(
                "a host registered in this transaction is not the team's"
            )  # pragma: no cover
        results[slot].update(attribution=answer[0], attribution_duplicates=answer[1])


@dataclass
class _Registration:
    counts: dict[str, int]  # the attribution's, when the batch carries it
    stored: _Stored | None  # None: no samples (done here)
    attribution: HostAttribution | None = None  # intervals to store (``attributions_store``)
    cached: bool = False  # the host's registration came from the cache


def _batch_register(
    *, batch: TelemetryBatch, attribution: Attribution | None, team_id: int, received_at: datetime
) -> _Registration:
    """One batch's part of ``telemetry_batches_store`` before the one-pass write: its host and GPUs
    (cached, else ``_register``), its attribution intervals; a batch without samples is done here."""
    parts = _registration_parts(batch)
    cached = registrations.get(team_id=team_id, hostname=batch.hostname, parts=parts)
    if cached is not None and not set(batch.gpus) <= cached.accelerators.keys():
        cached = None
    unchanged = True
    if cached is not None:
        host_id, known = cached.host_id, cached.accelerators
    else:
        host_id, known, unchanged = _register(batch=batch, team_id=team_id, received_at=received_at)
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
    pending = None
    if attribution is not None:
        counts = {"attribution": 0, "attribution_duplicates": 0}
        if len(attribution):
            pending = HostAttribution(attribution, host_id, vouched)
    if not batch.gpus:
        if cached is None:
            registrations.put(
                team_id=team_id,
                hostname=batch.hostname,
                parts=parts,
                host_id=host_id,
                accelerators=known,
                unchanged=unchanged,
            )
        return _Registration(counts, None, pending, cached is not None)
    missing = set(batch.gpus) - known.keys()
    if missing:
        index = next(i for i, gpu in enumerate(batch.gpus) if gpu in missing)
        raise IngestRejected(
            f"GPU {batch.gpus[index]!r} is neither in this batch's accelerators nor registered on "
            f"host {batch.hostname!r}",
            path=f"samples[{index}].gpu",
            code="unknown_accelerator",
        )
    # 1 Hz agents repeat each instant once per GPU: build each datetime once.
    stamps = {epoch: datetime.fromtimestamp(epoch, UTC) for epoch in set(batch.epochs)}
    return _Registration(
        counts,
        _Stored(
            batch=batch,
            host_id=host_id,
            accelerator_ids=list(map(known.__getitem__, batch.gpus)),
            known=known,
            parts=parts,
            unchanged=unchanged,
            times=list(map(stamps.__getitem__, batch.epochs)),
            cached=cached is not None,
            also=list(vouched.values()) if attribution is not None and cached is not None else [],
        ),
        pending,
        cached is not None,
    )
