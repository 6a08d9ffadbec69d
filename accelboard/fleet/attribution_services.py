"""Writes of GPU attribution (docs/attribution.md): a telemetry batch's workloads and intervals.

``attributions_store`` runs inside the batches' transaction (``ingest_services.telemetry_batches_store``),
after the host and its GPUs are registered and the partitions exist:
1. Each device named is this host's (a GPU, or a MIG instance whose parent GPU is): vouched for
   by the batch's registration (``registered``: the devices it lists, with their parents) or,
   for any other, one query.
2. Under a per-host advisory lock (two batches of one host at once cannot both miss the other's
   intervals), one query reads the stored intervals that overlap the batch's on its devices.
   A batch interval whose every part (below) is stored as it is, with the same workload, is a
   duplicate: skipped and counted. The rest, with the stored ones left, go through the same sweep
   as the batch alone (``attribution_validation.attribution_conflict``): a conflict with a stored
   interval is a 409 naming it.
3. One upsert of the batch's workloads (team, kind, uid), and one binary COPY of the intervals.
   The upsert leaves out the workloads this process wrote lately as they are (``WorkloadCache``:
   the same fields, seen within what was written, or at most ``WORKLOAD_SEEN_S`` after it); an
   agent repeats every holder in every batch, and rewriting each one's row every 10 s was a
   third of attribution's server CPU (bench/fleet_load.py --compare). So ``last_seen_at`` lags
   the newest interval by at most ``WORKLOAD_SEEN_S``. The lock's statement (2) also counts the
   cached workloads still stored under their ids as they were; a shortfall (a workload deleted,
   or ids handed out again after a database reset) empties the cache and they are upserted:
   an interval never lands under a dead or another workload's id (the intervals' table has no
   foreign keys, for COPY and partition drops).
An interval crossing midnight UTC is stored as one row per day, so a day's partition holds that
day whole and retention drops it whole (``partition_services``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from django.db import connection, transaction

from .attribution_validation import Attribution, WorkloadKey, attribution_conflict
from .ingest_validation import IngestRejected
from .models import ATTRIBUTION_COLUMNS
from .partition_services import ATTRIBUTION_TABLE

# The lock per host its intervals are checked and stored under (first key; the host id the second).
ADVISORY_ATTRIBUTION = 7_310_002
_DAY = timedelta(days=1)

_DEVICES_SQL = """
SELECT a.uuid, a.id, a.host_id, h.team_id, a.parent_uuid, p.host_id
FROM fleet_accelerator a
JOIN fleet_host h ON h.id = a.host_id
LEFT JOIN fleet_accelerator p ON p.uuid = a.parent_uuid AND a.parent_uuid <> ''
WHERE a.uuid = ANY(%s)
"""

# Partition pruning: a stored row overlapping [first, last) starts on or after first's day
# (rows never cross midnight) and before last.
_STORED_SQL = """
SELECT g.accelerator_id, g.start, g."end", g.share, w.kind, w.uid
FROM fleet_gpuattribution g JOIN fleet_workload w ON w.id = g.workload_id
WHERE g.accelerator_id = ANY(%s) AND g.start >= %s AND g.start < %s AND g."end" > %s
"""

_WORKLOADS_SQL = """
INSERT INTO fleet_workload AS o (
    team_id, kind, uid, namespace, name, container, labels, "user", account, "partition",
    first_seen_at, last_seen_at
)
SELECT %s, w.kind, w.uid, w.namespace, w.name, w.container, w.labels, w."user", w.account, w."partition",
    w.first_seen, w.last_seen
FROM jsonb_to_recordset(%s::jsonb) AS w(
    kind text, uid text, namespace text, name text, container text, labels jsonb, "user" text,
    account text, "partition" text, first_seen timestamptz, last_seen timestamptz
)
ORDER BY w.kind, w.uid
ON CONFLICT (team_id, kind, uid) DO UPDATE SET
    namespace = CASE WHEN EXCLUDED.namespace <> '' THEN EXCLUDED.namespace ELSE o.namespace END,
    name = CASE WHEN EXCLUDED.name <> '' THEN EXCLUDED.name ELSE o.name END,
    container = CASE WHEN EXCLUDED.container <> '' THEN EXCLUDED.container ELSE o.container END,
    labels = CASE WHEN EXCLUDED.labels <> '{}'::jsonb THEN EXCLUDED.labels ELSE o.labels END,
    "user" = CASE WHEN EXCLUDED."user" <> '' THEN EXCLUDED."user" ELSE o."user" END,
    account = CASE WHEN EXCLUDED.account <> '' THEN EXCLUDED.account ELSE o.account END,
    "partition" = CASE WHEN EXCLUDED."partition" <> '' THEN EXCLUDED."partition" ELSE o."partition" END,
    first_seen_at = LEAST(o.first_seen_at, EXCLUDED.first_seen_at),
    last_seen_at = GREATEST(o.last_seen_at, EXCLUDED.last_seen_at)
RETURNING id, kind, uid
"""

# A workload's ``last_seen_at`` is rewritten when a batch sees it this much later than written.
WORKLOAD_SEEN_S = 60.0


@dataclass(frozen=True)
class _Written:
    workload_id: int
    fields: dict[str, Any]
    first_seen: float
    last_seen: float
    expires: float


class WorkloadCache:
    """Per process: the workloads this process's committed upserts wrote, by (team, kind, uid),
    with their fields and seen span as written. Entries are put after the commit (a rolled-back
    insert leaves no id behind) and live ``ttl`` seconds."""

    def __init__(self, *, ttl: float = 300.0, size: int = 200_000) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: dict[tuple[int, str, str], _Written] = {}
        self._lock = threading.Lock()

    def get(
        self, *, team_id: int, key: WorkloadKey, fields: dict[str, Any], first: float, last: float
    ) -> int | None:
        """The workload's id when its row already says all this batch would write, else None."""
        entry = self._entries.get((team_id, *key))
        if (
            entry is None
            or entry.expires < time.monotonic()
            or entry.fields != fields
            or first < entry.first_seen
            or last > entry.last_seen + WORKLOAD_SEEN_S
        ):
            return None
        return entry.workload_id

    def put(
        self, *, team_id: int, written: dict[WorkloadKey, tuple[int, dict[str, Any], float, float]]
    ) -> None:
        expires = time.monotonic() + self.ttl
        with self._lock:
            if len(self._entries) + len(written) > self.size:
                self._entries.clear()
            for key, (workload_id, fields, first, last) in written.items():
                was = self._entries.get((team_id, *key))
                if was is not None and was.workload_id == workload_id and was.fields == fields:
                    first, last = min(first, was.first_seen), max(last, was.last_seen)
                self._entries[(team_id, *key)] = _Written(workload_id, fields, first, last, expires)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


workloads_written = WorkloadCache()

_COPY_TYPES = ("timestamptz", "timestamptz", "int8", "int8", "int8", "float8", "text", "int8", "float4")


def _moment(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def attribution_day_parts(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at each midnight UTC: the rows it is stored as."""
    parts = []
    while True:
        midnight = datetime(start.year, start.month, start.day, tzinfo=UTC) + _DAY
        if end <= midnight:
            parts.append((start, end))
            return parts
        parts.append((start, midnight))
        start = midnight


def attribution_range(attribution: Attribution) -> tuple[datetime, datetime]:
    """The first and last instants the batch's intervals need partitions for."""
    return _moment(min(attribution.starts)), _moment(max(attribution.ends)) - timedelta(microseconds=1)


def _devices(*, attribution: Attribution, team_id: int, host_id: int) -> dict[str, int] | None:
    """Each named device's id; None when the host is no longer ``team_id``'s (a stale cached
    registration). Raises ``IngestRejected`` naming the first interval whose device is not this
    host's (422 unknown; 409 another host's, or a MIG instance of another host's GPU)."""
    with connection.cursor() as cursor:
        cursor.execute(_DEVICES_SQL, [sorted(set(attribution.gpus))])
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    ids: dict[str, int] = {}
    for i, gpu in enumerate(attribution.gpus):
        if gpu in ids:
            continue
        path = f"attribution[{i}].gpu"
        row = rows.get(gpu)
        if row is None:
            raise IngestRejected(
                f"GPU {gpu!r} is neither in this batch's accelerators nor registered on this host",
                path=path,
                code="unknown_accelerator",
            )
        device_id, device_host, device_team, parent_uuid, parent_host = row
        if device_host != host_id:
            raise IngestRejected(
                f"GPU {gpu!r} is registered on another host",
                path=path,
                code="accelerator_conflict",
                status=409,
            )
        if device_team != team_id:
            return None
        if parent_uuid and parent_host is None:
            raise IngestRejected(
                f"MIG instance {gpu!r} is on GPU {parent_uuid!r}, which this host does not have",
                path=path,
                code="unknown_parent",
            )
        if parent_uuid and parent_host != host_id:
            raise IngestRejected(
                f"MIG instance {gpu!r} is on GPU {parent_uuid!r}, which is another host's",
                path=path,
                code="accelerator_conflict",
                status=409,
            )
        ids[gpu] = device_id
    return ids


def _stored(*, device_ids: list[int], first: datetime, last: datetime) -> list[tuple[Any, ...]]:
    floor = datetime(first.year, first.month, first.day, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute(_STORED_SQL, [device_ids, floor, last, first])
        return cursor.fetchall()


def _workloads_cached(
    *, fields: dict[WorkloadKey, dict[str, Any]], team_id: int, seen: dict[WorkloadKey, tuple[float, float]]
) -> dict[WorkloadKey, int]:
    """The workloads this process wrote as they are (``workloads_written``): their ids."""
    ids: dict[WorkloadKey, int] = {}
    for key, (first, last) in seen.items():
        known = workloads_written.get(team_id=team_id, key=key, fields=fields[key], first=first, last=last)
        if known is not None:
            ids[key] = known
    return ids


def _workloads_upsert(
    *,
    fields: dict[WorkloadKey, dict[str, Any]],
    team_id: int,
    seen: dict[WorkloadKey, tuple[float, float]],
    cached: dict[WorkloadKey, int],
) -> dict[WorkloadKey, int]:
    """Each workload's id: ``cached`` (checked still stored as they are), the rest by one upsert
    (remembered once the batch commits)."""
    ids = dict(cached)
    stale = {key: span for key, span in seen.items() if key not in cached}
    if not stale:
        return ids
    rows = [
        {**fields[key], "first_seen": _moment(first).isoformat(), "last_seen": _moment(last).isoformat()}
        for key, (first, last) in stale.items()
    ]
    with connection.cursor() as cursor:
        cursor.execute(_WORKLOADS_SQL, [team_id, json.dumps(rows)])
        written = {(kind, uid): workload_id for workload_id, kind, uid in cursor.fetchall()}
    ids.update(written)
    remember = {key: (written[key], fields[key], first, last) for key, (first, last) in stale.items()}
    transaction.on_commit(lambda: workloads_written.put(team_id=team_id, written=remember))
    return ids


def _copy(rows: list[tuple[Any, ...]]) -> None:
    connection.ensure_connection()
    # Django's error classes (a missing partition is an IntegrityError: ingest forgets the
    # partitions it remembered and stores the batch again).
    with connection.wrap_database_errors, connection.connection.cursor() as cursor:
        columns = ", ".join(f'"{name}"' for name in ATTRIBUTION_COLUMNS)
        with cursor.copy(f"COPY {ATTRIBUTION_TABLE} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(_COPY_TYPES))
            for row in rows:
                copy.write_row(row)


@dataclass(frozen=True)
class HostAttribution:
    """One batch's intervals for ``attributions_store``: its host and the device ids its
    registration vouches for (``attributions_store``'s ``registered``)."""

    attribution: Attribution
    host_id: int
    registered: dict[str, int]


_LOCKS_SQL = """
SELECT (SELECT count(*) FROM (
    SELECT {lock}(%s, h::int4) FROM (SELECT unnest(%s::int8[]) AS h ORDER BY h OFFSET 0) o
) locks), (
    SELECT count(*) FROM fleet_workload w
    JOIN unnest(%s::bigint[], %s::text[], %s::text[]) AS c(id, kind, uid)
      ON w.id = c.id AND w.kind = c.kind AND w.uid = c.uid
    WHERE w.team_id = %s
)
"""
# ``attributions_store(shared=True)``: the caller holds each device's lock of the items (a
# remote-write request's GPU merge locks, ``ingest_services.telemetry_merge_lock``), so the
# host's is taken shared: requests of one host with other devices go on at once, and a batch
# taking it exclusive (an agent's) still waits for them.
_LOCKS_EXCLUSIVE_SQL = _LOCKS_SQL.format(lock="pg_advisory_xact_lock")
_LOCKS_SHARED_SQL = _LOCKS_SQL.format(lock="pg_advisory_xact_lock_shared")


def _fields_merged(items: list[Attribution]) -> dict[WorkloadKey, dict[str, Any]]:
    """Each workload's fields over several batches, as their upserts one after the other would
    leave them (a later batch's non-empty field wins: ``_WORKLOADS_SQL``)."""
    merged: dict[WorkloadKey, dict[str, Any]] = {}
    for attribution in items:
        for key, fields in attribution.workload_fields.items():
            was = merged.get(key)
            merged[key] = fields if was is None else {k: v if v else was.get(k, v) for k, v in fields.items()}
    return merged


def attributions_store(
    *, items: list[HostAttribution], team_id: int, shared: bool = False
) -> list[tuple[int, int] | None]:
    """Store batches' intervals and workloads (the module's docstring), several batches (hosts) at
    once in as many statements as one: each answer (intervals stored, duplicates skipped), or
    None when the host is no longer ``team_id``'s (the caller's cached registration is stale: it
    rolls back). Run inside the batches' transaction, after their partitions exist. Each item's
    ``registered``: ids of devices the caller's registration has checked are this host's, the
    team's, and (MIG instances) on this host's GPUs, in this transaction or confirmed before it
    commits; the others are read. In statements:
    one lock statement (the hosts' locks in id order), one read of the stored intervals, one
    workloads upsert, one COPY. An
    ``IngestRejected`` carries the item's position as ``index``. Two items of one host are
    stored one after the other (the second checked against the first's intervals). ``shared``:
    the caller holds every item's devices' exclusive locks (``_LOCKS_SHARED_SQL``)."""
    answers: list[tuple[int, int] | None] = [None] * len(items)
    hosts = [item.host_id for item in items]
    if len(set(hosts)) < len(hosts):
        again = [k for k in range(len(items)) if hosts[k] in hosts[:k]]
        once = [k for k in range(len(items)) if k not in again]
        for part in (once, again):
            try:
                for k, answer in zip(
                    part,
                    attributions_store(items=[items[k] for k in part], team_id=team_id, shared=shared),
                    strict=True,
                ):
                    answers[k] = answer
            except IngestRejected as exc:
                if exc.index is not None:
                    exc.index = part[exc.index]
                raise
        return answers
    devices_of: dict[int, list[int]] = {}
    for k, item in enumerate(items):
        vouched = item.registered
        attribution = item.attribution
        try:
            if all(gpu in vouched for gpu in attribution.gpus):
                device_ids: dict[str, int] | None = {gpu: vouched[gpu] for gpu in attribution.gpus}
            else:
                device_ids = _devices(attribution=attribution, team_id=team_id, host_id=item.host_id)
        except IngestRejected as exc:
            exc.index = k
            raise
        if device_ids is not None:
            devices_of[k] = [device_ids[gpu] for gpu in attribution.gpus]
    live = [k for k in range(len(items)) if k in devices_of and len(items[k].attribution)]
    for k in devices_of:
        answers[k] = (0, 0)
    if not live:
        return answers
    fields = _fields_merged([items[k].attribution for k in live])
    seen: dict[WorkloadKey, tuple[float, float]] = {}
    for k in live:
        attribution = items[k].attribution
        for key, start, end in zip(attribution.workloads, attribution.starts, attribution.ends, strict=True):
            was = seen.get(key)
            seen[key] = (start, end) if was is None else (min(was[0], start), max(was[1], end))
    cached = _workloads_cached(fields=fields, team_id=team_id, seen=seen)
    with connection.cursor() as cursor:
        # The lock's statement also counts the cached workloads still stored as they were: a row
        # deleted, or ids handed out again after the database was reset (the demo's reset
        # restarts them), must not take a batch's intervals. No extra round trip.
        cursor.execute(
            _LOCKS_SHARED_SQL if shared else _LOCKS_EXCLUSIVE_SQL,
            [
                ADVISORY_ATTRIBUTION,
                sorted({items[k].host_id for k in live}),
                list(cached.values()),
                [key[0] for key in cached],
                [key[1] for key in cached],
                team_id,
            ],
        )
        alive = cursor.fetchone()[1]
    if alive != len(cached):
        workloads_written.clear()
        cached = {}
    first = _moment(min(min(items[k].attribution.starts) for k in live))
    last = _moment(max(max(items[k].attribution.ends) for k in live))
    stored_by_device: dict[int, list[tuple[Any, ...]]] = {}
    for row in _stored(device_ids=sorted({d for k in live for d in devices_of[k]}), first=first, last=last):
        stored_by_device.setdefault(row[0], []).append(row)
    fresh_of: dict[int, list[int]] = {}
    for k in live:
        attribution = items[k].attribution
        devices = devices_of[k]
        stored = [row for device in sorted(set(devices)) for row in stored_by_device.get(device, ())]
        fresh_of[k] = _fresh(k=k, attribution=attribution, devices=devices, stored=stored)
    workload_ids = _workloads_upsert(fields=fields, team_id=team_id, seen=seen, cached=cached)
    rows: list[tuple[Any, ...]] = []
    for k in live:
        attribution, devices = items[k].attribution, devices_of[k]
        for i in fresh_of[k]:
            begins, ends = _moment(attribution.starts[i]), _moment(attribution.ends[i])
            rows.extend(
                (
                    low,
                    high,
                    items[k].host_id,
                    devices[i],
                    workload_ids[attribution.workloads[i]],
                    attribution.shares[i],
                    attribution.bases[i],
                    attribution.memory_bytes[i],
                    attribution.sm_utils[i],
                )
                for low, high in attribution_day_parts(begins, ends)
            )
        answers[k] = (len(fresh_of[k]), len(attribution) - len(fresh_of[k]))
    if rows:
        _copy(rows)
    return answers


def _fresh(
    *, k: int, attribution: Attribution, devices: list[int], stored: list[tuple[Any, ...]]
) -> list[int]:
    """The positions of the batch's intervals not stored already (each of whose day parts is
    stored as it is, with the same workload); raises ``IngestRejected`` (409, ``index`` ``k``)
    for one that overlaps another stored interval."""
    count = len(attribution)
    if not stored:
        return list(range(count))
    by_key = {(row[0], (row[4], row[5]), row[1], row[2]): n for n, row in enumerate(stored)}
    matched: set[int] = set()
    fresh = []
    for i in range(count):
        parts = attribution_day_parts(_moment(attribution.starts[i]), _moment(attribution.ends[i]))
        keys = [(devices[i], attribution.workloads[i], start, end) for start, end in parts]
        if all(key in by_key for key in keys):
            matched.update(by_key[key] for key in keys)
        else:
            fresh.append(i)
    left = [row for n, row in enumerate(stored) if n not in matched]
    conflict = attribution_conflict(
        gpus=[devices[i] for i in fresh] + [row[0] for row in left],
        starts=[attribution.starts[i] for i in fresh] + [row[1].timestamp() for row in left],
        ends=[attribution.ends[i] for i in fresh] + [row[2].timestamp() for row in left],
        workloads=[attribution.workloads[i] for i in fresh] + [(row[4], row[5]) for row in left],
        shares=[attribution.shares[i] for i in fresh] + [row[3] for row in left],
        new=len(fresh),
    )
    if conflict is not None:
        earlier, later, rule = conflict
        index = fresh[earlier]
        device, start, end, _, kind, uid = left[later - len(fresh)]
        exc = IngestRejected(
            f"overlaps the stored interval of {kind} {uid!r} on GPU {attribution.gpus[index]!r} "
            f"from {start.isoformat()} to {end.isoformat()}: {rule}",
            path=f"attribution[{index}]",
            code="attribution_conflict",
            status=409,
        )
        exc.index = k
        raise exc
    return fresh


# One statement: the rows' new ends, and their workloads' ``last_seen_at`` where it lags the new
# end by more than ``WORKLOAD_SEEN_S`` (as an upsert would move it).
_EXTEND_SQL = f"""
WITH extended AS (
    UPDATE {ATTRIBUTION_TABLE} AS g SET "end" = v.new_end
    FROM unnest(%b::int8[], %b::timestamptz[], %b::timestamptz[]) AS v(id, start, new_end)
    WHERE g.id = v.id AND g.start = v.start AND g."end" < v.new_end
    RETURNING g.workload_id, g."end"
)
UPDATE fleet_workload AS w SET last_seen_at = e.last
FROM (SELECT workload_id, max("end") AS last FROM extended GROUP BY workload_id) AS e
WHERE w.id = e.workload_id AND w.last_seen_at < e.last - make_interval(secs => %b::float8)
"""


def attribution_extend(*, rows: list[tuple[int, datetime, datetime]]) -> None:
    """Move stored intervals' ends later: ``rows`` of (id, start, new end), each new end within
    its row's UTC day and its new part covered by no other stored interval of the device (the
    caller checked both, under ``ADVISORY_ATTRIBUTION``'s lock of the host). Prometheus
    remote-write's steady pods (``remote_write_pods.pod_intervals_extend``)."""
    if not rows:
        return
    # Bound on the server, its arrays in binary, prepared once per connection: Django's cursor
    # quoted each id and timestamp of the arrays in Python (docs/scaling.md, 2026-12-07).
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            _EXTEND_SQL,
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], float(WORKLOAD_SEEN_S)],
            prepare=True,
        )
