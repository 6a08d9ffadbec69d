"""The production pass: read the last window of serving metrics and GPU rollups, apply the pure
rules of ``production.py``, and keep one alert per ongoing condition.

1. One pass at a time: a Postgres advisory lock taken with ``pg_try_advisory_xact_lock``; a
   second worker finds it held and returns at once (beat and a manual run cannot double up).
2. One alert per condition episode and entity (a served model on a host, or one GPU): while an
   alert for it is open or acknowledged, a new finding refreshes its figures instead of opening
   another. The dedupe key carries the episode's start, so a condition that comes back later is
   a new alert.
3. Serving rules compare complete intervals with complete intervals: the recent ones are those
   that ended inside the window, the reference those that ended before them (within
   ``REFERENCE``), and an interval's energy counts only when every minute of it, on every GPU
   the model runs on, has a rollup with energy (``interval_energy``).
4. A condition that no longer holds on fresh data resolves its alert (reason "cleared"), except
   hardware errors, which stay until a person resolves them. An entity without data in the
   window is not judged either way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict

from django.db import connection, transaction

from accelboard.core.models import Team
from accelboard.fleet.choices import RollupWidth
from accelboard.fleet.models import Accelerator, Host, TelemetryRollup
from accelboard.serving.models import InferenceMetric

from . import production
from .choices import AlertKind, AlertState, Severity
from .models import Alert, ServingSlo
from .services import alert_raise, alert_resolve

_LOCK = (0x41_4C, 0)  # alerts namespace, key 0: the production pass
_AUTO_RESOLVE = {AlertKind.SLO, AlertKind.THROUGHPUT, AlertKind.ENERGY, AlertKind.MEMORY, AlertKind.THROTTLE}
REFERENCE = timedelta(hours=6)
_LONGEST_INTERVAL = timedelta(hours=1)  # serving intervals are at most an hour long


@dataclass
class ProductionSummary:
    skipped: bool = False
    findings: int = 0
    raised: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)


class _Subject(TypedDict):
    """What a finding is about: ``_Pass.finding``'s arguments besides the finding itself."""

    entity: str
    team_id: int
    host_id: int | None
    model: NotRequired[str]


def _reference_mean(found: production.Finding) -> float | None:
    """The reference level a throughput or energy finding compared with; None for the others."""
    value = found.detail.get("reference_tokens_per_s") or found.detail.get("reference_j_per_token")
    return float(value) if isinstance(value, int | float) else None


@dataclass
class _Pass:
    summary: ProductionSummary
    judged: set[tuple[str, str]] = field(default_factory=set)  # (kind, entity) evaluated on data
    holding: set[tuple[str, str]] = field(default_factory=set)

    def finding(
        self,
        *,
        kind: str,
        entity: str,
        team_id: int,
        host_id: int | None,
        severity: str,
        title: str,
        found: production.Finding,
        model: str = "",
    ) -> None:
        self.holding.add((kind, entity))
        self.summary.findings += 1
        active = Alert.objects.filter(
            kind=kind, detail__entity=entity, state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED]
        ).first()
        detail: dict[str, Any] = {
            "entity": entity,
            "reason": found.reason,
            "threshold": found.threshold,
            **({"summary": found.summary} if found.summary else {}),
            # What the alerts page filters on, as for benchmark alerts (model and metric).
            "metric": _METRIC_OF_KIND.get(kind, kind),
            **({"model": model} if model else {}),
            **found.detail,
        }
        if active is not None:
            alert_raise(
                team=active.team,
                kind=kind,
                dedupe_key=active.dedupe_key,
                title=title,
                before_mean=_reference_mean(found),
                after_mean=found.value,
                pct_change=found.pct_change,
                confidence=found.confidence,
                detail={**active.detail, **detail},
            )
            return
        alert, created = alert_raise(
            team=_team(team_id),
            kind=kind,
            severity=severity,
            dedupe_key=f"prod:{kind}:{entity}:{found.since:%Y%m%dT%H%M}",
            title=title,
            host=_host(host_id),
            before_mean=_reference_mean(found),
            after_mean=found.value,
            pct_change=found.pct_change,
            confidence=found.confidence,
            detail={**detail, "since": found.since.isoformat()},
        )
        if created:
            self.summary.raised.append(alert.pk)


# The signal each production rule watches, named like the benchmark metrics it mirrors.
_METRIC_OF_KIND: dict[str, str] = {
    AlertKind.SLO: "latency_e2e_p99_ms",
    AlertKind.THROUGHPUT: "throughput_tokens_per_s",
    AlertKind.ENERGY: "energy_per_token_j",
    AlertKind.MEMORY: "memory_used_pct",
    AlertKind.THROTTLE: "throttled_share",
    AlertKind.HARDWARE: "gpu_errors",
}


def _team(team_id: int) -> Team:
    return Team(pk=team_id)


def _host(host_id: int | None) -> Host | None:
    return Host(pk=host_id) if host_id else None


def _complete(rows: list[InferenceMetric], now: datetime) -> list[InferenceMetric]:
    """Intervals that had ended by ``now``: a partial one would be compared as if it were full."""
    return [r for r in rows if r.interval_start + timedelta(seconds=r.interval_s) <= now]


def _serving(p: _Pass, *, start: datetime, end: datetime) -> None:
    rows = list(
        InferenceMetric.objects.filter(
            interval_start__gte=start - REFERENCE - _LONGEST_INTERVAL, interval_start__lt=end
        )
        .select_related("variant__model", "host")
        .order_by("interval_start")
    )
    slos: dict[tuple[int, int, int | None], ServingSlo] = {
        (s.team_id, s.model_id, s.variant_id): s for s in ServingSlo.objects.all()
    }
    groups: dict[tuple[int, int], list[InferenceMetric]] = defaultdict(list)
    for row in _complete(rows, end):
        groups[(row.host_id, row.variant_id)].append(row)
    for (host_id, _variant_id), items in groups.items():
        # Recent: the complete intervals that ended inside the window; reference: those that
        # ended before the first of them, within REFERENCE.
        recent = [r for r in items if r.interval_start + timedelta(seconds=r.interval_s) > start]
        if not recent:
            continue
        first = recent[0]
        reference = [
            r
            for r in items
            if r.interval_start + timedelta(seconds=r.interval_s) <= first.interval_start
            and r.interval_start >= first.interval_start - REFERENCE
        ]
        entity = f"serving:{host_id}:{first.variant_id}"
        label = f"{first.variant} on {first.host}"
        slo = slos.get((first.team_id, first.variant.model_id, first.variant_id)) or slos.get(
            (first.team_id, first.variant.model_id, None)
        )
        common: _Subject = {
            "entity": entity,
            "team_id": first.team_id,
            "host_id": host_id,
            "model": first.variant.model.name,
        }
        if slo is not None and slo.p99_latency_ms:
            p.judged.add((AlertKind.SLO, entity))
            found = production.slo_breach(
                [(r.interval_start, r.e2e_p99_ms) for r in recent], slo_ms=slo.p99_latency_ms
            )
            if found:
                p.finding(
                    kind=AlertKind.SLO,
                    severity=Severity.CRITICAL,
                    title=f"p99 latency over SLO · {label}",
                    found=found,
                    **common,
                )
        p.judged.add((AlertKind.THROUGHPUT, entity))
        found = production.decode_speed_drop(
            [(r.requests / r.interval_s, r.itl_p50_ms) for r in recent],
            [(r.requests / r.interval_s, r.itl_p50_ms) for r in reference],
            since=first.interval_start,
        )
        if found is None and slo is not None and slo.min_tokens_per_s:
            found = production.throughput_floor(
                [(r.interval_start, r.interval_s, r.requests, r.generated_tokens) for r in recent],
                floor_tokens_per_s=slo.min_tokens_per_s,
            )
        if found:
            p.finding(
                kind=AlertKind.THROUGHPUT,
                severity=Severity.WARNING,
                title=f"Throughput drop · {label}",
                found=found,
                **common,
            )
        _energy(p, recent=recent, reference=reference, label=label, common=common)


def interval_energy(
    rows: list[tuple[int, datetime, float | None]], intervals: list[tuple[datetime, int]], gpus: int
) -> list[float | None]:
    """Energy (J) of the GPUs over each (start, seconds) interval from minute rollups
    (accelerator, bucket, energy_j); None where a GPU-minute in it has no energy (a gap, or
    telemetry sampled less often than once a minute): an interval is measured whole or not at all."""
    per_minute: dict[datetime, tuple[int, float]] = {}
    for _gpu, bucket, energy in rows:
        if energy is None:
            continue
        count, total = per_minute.get(bucket, (0, 0.0))
        per_minute[bucket] = (count + 1, total + energy)
    out: list[float | None] = []
    for begin, seconds in intervals:
        minutes = max(1, seconds // 60)
        total, complete = 0.0, True
        for i in range(minutes):
            count, energy = per_minute.get(begin + timedelta(minutes=i), (0, 0.0))
            if count < gpus:
                complete = False
                break
            total += energy
        out.append(total if complete else None)
    return out


def _energy(
    p: _Pass,
    *,
    recent: list[InferenceMetric],
    reference: list[InferenceMetric],
    label: str,
    common: _Subject,
) -> None:
    uuids = sorted({u for r in recent for u in r.accelerator_uuids})
    if not uuids or not reference:
        return
    ids = list(Accelerator.objects.filter(uuid__in=uuids).values_list("id", flat=True))
    if not ids:
        return
    first, last = (
        reference[0].interval_start,
        recent[-1].interval_start + timedelta(seconds=recent[-1].interval_s),
    )
    rows = list(
        TelemetryRollup.objects.filter(
            width_s=RollupWidth.MINUTE, accelerator_id__in=ids, bucket__gte=first, bucket__lt=last
        ).values_list("accelerator_id", "bucket", "energy_j")
    )

    def measured(items: list[InferenceMetric]) -> list[tuple[float, int, float]]:
        energy = interval_energy(rows, [(r.interval_start, r.interval_s) for r in items], len(ids))
        return [(float(r.interval_s), r.generated_tokens, e) for r, e in zip(items, energy, strict=True) if e]

    p.judged.add((AlertKind.ENERGY, common["entity"]))
    found = production.energy_per_token_rise(
        measured(recent), measured(reference), since=recent[0].interval_start
    )
    if found:
        p.finding(
            kind=AlertKind.ENERGY,
            severity=Severity.WARNING,
            title=f"Energy per token up · {label}",
            found=found,
            **common,
        )


# Per GPU with minute rollups in the window and its host's team: whether any rule could hold,
# from the rollups alone. Each test is weaker than its rule: a sustained run of memory above the
# limit (or of throttling) ends in the window, so some minute of it is over the limit (throttling:
# at most the newest two minutes are unsure, ``_ROLLUP_UNSURE``, and a run needs five); a counter
# that went up is larger somewhere than somewhere before it, so its maximum exceeds its minimum.
_GPU_SCREEN_SQL = """
SELECT r.accelerator_id, h.team_id,
       bool_or(r.bucket >= %(start)s AND r.mem_total_bytes > 0
               AND r.mem_used_avg_bytes / r.mem_total_bytes::float8 > %(memory)s)
       OR bool_or(r.bucket >= %(start)s AND r.samples > 0
                  AND r.throttled_samples::float8 / r.samples >= %(throttle)s)
       OR max(r.ecc_errors_max) > min(r.ecc_errors_max)
       OR max(r.xid_errors_max) > min(r.xid_errors_max)
FROM fleet_telemetryrollup r
JOIN fleet_accelerator a ON a.id = r.accelerator_id
JOIN fleet_host h ON h.id = a.host_id
WHERE r.width_s = 60 AND r.bucket >= %(lookback)s AND r.bucket < %(end)s
GROUP BY r.accelerator_id, h.team_id
HAVING bool_or(r.bucket >= %(start)s)
"""


def gpus_screen(*, start: datetime, end: datetime) -> tuple[list[int], list[int]]:
    """The GPUs of a team with minute rollups in [start, end): (those a GPU rule could hold for,
    the others). Only the first are read row by row; the others are judged as holding nothing, so
    their memory and throttle alerts resolve. It read every minute row of the last 75 minutes of
    the fleet into Python (1.2M rows at 2,000 hosts of 8 GPUs) to find a few."""
    with connection.cursor() as cursor:
        cursor.execute(
            _GPU_SCREEN_SQL,
            {
                "start": start,
                "end": end,
                "lookback": start - timedelta(hours=1),
                "memory": production.MEMORY_FRACTION,
                "throttle": production.THROTTLE_FRACTION,
            },
        )
        screened = cursor.fetchall()
    possible = sorted(gpu for gpu, team, maybe in screened if team is not None and maybe)
    fine = sorted(gpu for gpu, team, maybe in screened if team is not None and not maybe)
    return possible, fine


def _gpus(p: _Pass, *, start: datetime, end: datetime) -> None:
    possible, fine = gpus_screen(start=start, end=end)
    for gpu_id in fine:
        p.judged.update({(AlertKind.MEMORY, f"gpu:{gpu_id}"), (AlertKind.THROTTLE, f"gpu:{gpu_id}")})
    if not possible:
        return
    rows = list(
        TelemetryRollup.objects.filter(
            width_s=RollupWidth.MINUTE,
            bucket__gte=start - timedelta(hours=1),
            bucket__lt=end,
            accelerator_id__in=possible,
        )
        .order_by("accelerator_id", "bucket")
        .values_list(
            "accelerator_id",
            "host_id",
            "bucket",
            "samples",
            "mem_used_avg_bytes",
            "mem_total_bytes",
            "throttled_samples",
            "ecc_errors_max",
            "xid_errors_max",
        )
    )
    per_gpu: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        per_gpu[row[0]].append(row)
    gpus = Accelerator.objects.in_bulk(list(per_gpu)) if per_gpu else {}
    candidates = throttle_candidates(per_gpu, start=start, end=end)
    slowdown = slowdown_minutes(start=start, end=end, gpu_ids=candidates) if candidates else {}
    teams = dict(Accelerator.objects.filter(pk__in=list(per_gpu)).values_list("pk", "host__team_id"))
    for gpu_id, items in per_gpu.items():
        team_id = teams.get(gpu_id)
        recent = [r for r in items if r[2] >= start]
        if team_id is None or not recent:
            continue
        before = [r for r in items if r[2] < start]
        entity, host_id = f"gpu:{gpu_id}", recent[0][1]
        gpu = gpus[gpu_id]
        label = f"GPU {gpu.index} ({gpu.uuid[:12]}…) on host {host_id}"
        common: _Subject = {"entity": entity, "team_id": team_id, "host_id": host_id}
        p.judged.add((AlertKind.MEMORY, entity))
        since = production.sustained([(r[2], production.memory_high(r[4], r[5])) for r in recent])
        if since:
            share = max(r[4] / r[5] for r in recent if r[4] is not None and r[5])
            minutes = sum(1 for r in recent if r[2] >= since)
            found = production.Finding(
                since=since,
                value=share * 100,
                threshold=production.MEMORY_FRACTION * 100,
                reason=f"memory above 95% in each of the last {minutes} minutes (peak {share:.1%})",
                detail={"unit": "%"},
                confidence=1.0,  # every minute of the run
                summary=f"{share:.1%} of memory",
            )
            p.finding(
                kind=AlertKind.MEMORY,
                severity=Severity.WARNING,
                title=f"Memory above 95% · {label}",
                found=found,
                **common,
            )
        p.judged.add((AlertKind.THROTTLE, entity))
        slowed = slowdown.get(gpu_id, {})
        since = production.sustained(
            [(r[2], production.throttled(*slowed.get(r[2], (0, r[3])))) for r in recent]
        )
        if since:
            window = [slowed.get(r[2], (0, r[3])) for r in recent if r[2] >= since]
            share = sum(a for a, _ in window) / max(1, sum(b for _, b in window))
            found = production.Finding(
                since=since,
                value=share * 100,
                threshold=production.THROTTLE_FRACTION * 100,
                reason=f"thermal or hardware slowdown in at least half of the samples of each of the last "
                f"{len(window)} minutes ({share:.0%} of them)",
                detail={"unit": "%"},
                confidence=1.0,  # every minute of the run
                summary="slowed down",
            )
            p.finding(
                kind=AlertKind.THROTTLE,
                severity=Severity.WARNING,
                title=f"Throttling · {label}",
                found=found,
                **common,
            )
        for name, col in (("ECC", 7), ("XID", 8)):
            prior = next((r[col] for r in reversed(before) if r[col] is not None), None)
            errors = production.counter_increase(prior, [r[col] for r in recent])
            if errors:
                first = next(r[2] for r in recent if r[col] is not None and (prior is None or r[col] > prior))
                found = production.Finding(
                    since=first,
                    value=float(errors),
                    threshold=0.0,
                    reason=f"{errors} new {name} error(s) in the window",
                    detail={"counter": name},
                    confidence=1.0,  # a counter that went up is a fact
                    summary=f"+{errors} {name}",
                )
                p.finding(
                    kind=AlertKind.HARDWARE,
                    severity=Severity.CRITICAL,
                    title=f"{name} errors · {label}",
                    found=found,
                    **common,
                )


# Clock-event reasons that are a fault to look into: HW slowdown, SW and HW thermal slowdown, HW
# power brake. The SW power cap (0x4) is not one: a GPU at full load sits at its power limit by
# design (the fleet pages still count it as throttled time).
SLOWDOWN_MASK = 0x8 | 0x20 | 0x40 | 0x80


# Minute rollups this close to the end of the window may not hold every raw sample of their
# minute yet (the drains follow ingest by seconds).
_ROLLUP_UNSURE = timedelta(minutes=2)


def throttle_candidates(
    per_gpu: dict[int, list[tuple[Any, ...]]], *, start: datetime, end: datetime
) -> list[int]:
    """The GPUs whose minute rollups (rows as ``_gpus`` reads them) could pass the throttle rule in
    [start, end): only theirs need raw samples. A rollup counts samples with any throttle reason,
    the power cap included, so its share bounds the fault-only share from above; the newest
    minutes count as possible. Without this the pass grouped every raw sample of the window (15
    minutes of the whole fleet: 14M rows at 2,000 hosts of 8 GPUs) to find a few faults."""
    unsure_from = end - _ROLLUP_UNSURE
    return [
        gpu_id
        for gpu_id, items in per_gpu.items()
        if production.sustained(
            [
                (r[2], True if r[2] >= unsure_from else production.throttled(r[6] or 0, r[3]))
                for r in items
                if start <= r[2] < end
            ]
        )
    ]


def slowdown_minutes(
    *, start: datetime, end: datetime, gpu_id: int | None = None, gpu_ids: Sequence[int] | None = None
) -> dict[int, dict[datetime, tuple[int, int]]]:
    """Per GPU (the one GPU, or those of ``gpu_ids``) and minute of [start, end): (samples slowed by
    a fault, samples), from raw samples (minute rollups count any throttle reason, the power cap
    included)."""
    if gpu_id is not None:
        gpu_ids = [gpu_id]
    one = "AND accelerator_id = ANY(%s)" if gpu_ids is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT accelerator_id, date_trunc('minute', time) AS minute,
                   count(*) FILTER (WHERE (coalesce(throttle_reasons, 0) & %s) <> 0), count(*)
            FROM fleet_telemetrysample
            WHERE time >= %s AND time < %s {one}
            GROUP BY 1, 2
            ORDER BY 1, 2
            """,  # noqa: S608 - a fixed fragment, values are parameters
            [SLOWDOWN_MASK, start, end, *([list(gpu_ids)] if gpu_ids is not None else [])],
        )
        out: dict[int, dict[datetime, tuple[int, int]]] = defaultdict(dict)
        for gpu_id, minute, slowed, samples in cursor.fetchall():
            out[gpu_id][minute] = (slowed, samples)
    return out


def production_check(*, now: datetime, window: timedelta = timedelta(minutes=15)) -> ProductionSummary:
    """One pass over the last ``window`` before ``now``. See the module docstring."""
    summary = ProductionSummary()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", list(_LOCK))
            if not cursor.fetchone()[0]:
                summary.skipped = True
                return summary
        p = _Pass(summary=summary)
        start = now - window
        _serving(p, start=start, end=now)
        _gpus(p, start=start, end=now)
        cleared = {key for key in p.judged - p.holding if key[0] in _AUTO_RESOLVE}
        if cleared:
            for alert in Alert.objects.filter(
                kind__in={k for k, _ in cleared}, state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED]
            ):
                if (alert.kind, alert.detail.get("entity")) in cleared:
                    alert_resolve(alert=alert, reason="cleared", note="the condition no longer holds")
                    summary.resolved.append(alert.pk)
    return summary
