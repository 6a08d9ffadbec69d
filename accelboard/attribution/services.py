"""Writes of attribution: versions of the rules, and each UTC day's allocation of GPU cost and
energy to the workloads that held the GPUs (docs/attribution.md).

1. **Rules** (``rule_set_save``): an admin saves the whole rule list as a new version. It is
   refused (``ValidationError`` naming ``rules[i]``) when a rule is malformed, when two rules of
   one selector and value map to different targets (both named: ``rules.rules_check``), or when
   it names a team the admin may not manage (``core.access``). Older versions stay unchanged.
2. **Allocation** (``allocation_day_compute``): for one UTC day, every GPU-day behind a
   ``CostDaily`` row is split by ``allocation.allocate_days``:
   - the GPU-day's cost ``C`` is its part of its host-day-type row's ``total_cost`` (the figure
     the cost pages show for the row), taken at the cent (ROUND_HALF_EVEN) and split across the
     row's GPUs by their reporting minutes (60 s rollups) with the largest-remainder rule, so the
     row's GPUs add up to the row at the cent exactly (ties to the lower accelerator id);
     the row's GPUs are its physical GPUs (MIG instances count through their GPU);
   - its energy ``E`` is the sum of its minute rollups' energy, and its minutes' utilisation and
     energy are those rollups' (NaN where a minute has none);
   - its devices are the GPU itself, or, where MIG instances of it held workloads that day, those
     instances at ``compute_slices / total`` of the GPU;
   - its intervals are the day's ``GpuAttribution`` rows of those devices, each workload's team
     (and model) that of the current rule set (``rules.workload_match``; no match: unattributed);
     the model it served is the serving metrics' on the devices it held that day, while it held
     them (``selectors.workload_served_models``, ``rules.served_model``): a ``model_name`` rule
     selects it, and without a rule it is the workload's model (``model_source`` says which).
   The day's ``AllocationDaily`` rows are replaced in one transaction under a per-day advisory
   lock: safe to re-run, and in parallel.
3. **Re-applying rules** to a past period is an explicit action (``accelboard allocation
   recompute``, the admin's action): ``allocation_days_compute`` over those days.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from accelboard.core.access import Action, scope_for_user
from accelboard.core.models import Team
from accelboard.core.services import job_run_record, job_run_record_unless_caller
from accelboard.costs.models import CostDaily
from accelboard.fleet.models import Accelerator, GpuAttribution, Workload

from . import rules as pure
from .allocation import DayBatch, allocate_days, units_split
from .choices import AllocationKind
from .models import AllocationDaily, AttributionRule, RuleSet
from .selectors import rule_set_current, rule_set_rules, workload_served_models

DAY_S = 86_400
MINUTES = DAY_S // 60
MINUTE_S = 60
CENT = Decimal("0.01")
_LOCK_DAY = zlib.crc32(b"accelboard.attribution.day") & 0x7FFFFFFF
_LOCK_RULES = zlib.crc32(b"accelboard.attribution.rules") & 0x7FFFFFFF


# --- rules ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleInput:
    """One rule as an admin writes it; ``value`` is ``key=value`` for a label rule."""

    selector: str
    value: str
    team: Team | None = None
    model: str = ""
    variant: str = ""


def _pure(rules: Sequence[RuleInput]) -> list[pure.Rule]:
    return [
        pure.Rule(
            id=i + 1,
            selector=rule.selector,
            value=rule.value,
            team=str(rule.team.pk) if rule.team is not None else None,
            model=rule.model or None,
            variant=rule.variant or None,
        )
        for i, rule in enumerate(rules)
    ]


def _target(rule: RuleInput, what: str) -> str:
    if what == "team":
        return f"team {rule.team.slug if rule.team else '-'}"
    return f"model {rule.model} {rule.variant}".rstrip()


def rule_set_check(*, user: Any, rules: Sequence[RuleInput]) -> None:
    """Refuse what ``rule_set_save`` would refuse (``PermissionDenied``, ``ValidationError``)."""
    scope = scope_for_user(user)
    if not scope.can_everywhere(Action.MANAGE):
        raise PermissionDenied("only staff save attribution rules")
    for i, rule in enumerate(rules):
        if rule.team is not None and not scope.can(Action.MANAGE, rule.team):
            raise ValidationError({f"rules[{i}].team": f"you may not manage team {rule.team.slug!r}"})
    try:
        pure.rules_check(_pure(rules))
    except pure.RuleConflict as exc:
        first, second = (rule_id - 1 for rule_id in exc.rule_ids)
        what = "team" if "teams" in str(exc) else "model"
        a, b = rules[first], rules[second]
        raise ValidationError(
            {
                f"rules[{second}]": (
                    f"rules[{first}] and rules[{second}] both select {a.selector} {a.value!r} but map it "
                    f"to different {what}s ({_target(a, what)} / {_target(b, what)})"
                )
            }
        ) from None
    except ValueError as exc:
        # "rule 3.selector: ..." -> rules[2].selector
        head, _, message = str(exc).partition(": ")
        number, _, field = head.removeprefix("rule ").partition(".")
        raise ValidationError({f"rules[{int(number) - 1}].{field}": message}) from None


def rule_set_save(*, user: Any, rules: Sequence[RuleInput], note: str = "") -> RuleSet:
    """Save ``rules`` as the next version (the module's docstring, 1); nothing is stored when
    refused. The allocation of past days keeps its version until it is recomputed."""
    rule_set_check(user=user, rules=rules)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_RULES])
        latest = RuleSet.objects.aggregate(v=Max("version"))["v"] or 0
        rule_set = RuleSet.objects.create(
            version=latest + 1,
            created_by=user if getattr(user, "pk", None) else None,
            created_at=timezone.now(),
            note=note[:200],
        )
        AttributionRule.objects.bulk_create(
            AttributionRule(
                rule_set=rule_set,
                position=i + 1,
                selector=rule.selector,
                value=rule.value,
                team=rule.team,
                model=rule.model,
                variant=rule.variant,
            )
            for i, rule in enumerate(rules)
        )
    return rule_set


# --- allocation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AllocationDayResult:
    day: date
    gpu_days: int
    rows: int
    rule_set_version: int | None


def _cents(amount: Decimal | None) -> int:
    return int((amount or Decimal(0)).quantize(CENT, rounding=ROUND_HALF_EVEN) * 100)


# One row per GPU with its day's minutes as arrays (a fleet-day is ~1,440 rollups per GPU: arrays
# cross to Python far faster than one tuple per minute).
_ROLLUPS_SQL = """
SELECT r.accelerator_id, min(r.host_id), min(a.accelerator_type_id), bool_or(a.parent_uuid <> ''),
       array_agg(floor(extract(epoch FROM r.bucket - %(start)s) / 60)::int ORDER BY r.bucket),
       array_agg(r.gpu_util_avg ORDER BY r.bucket), array_agg(r.energy_j ORDER BY r.bucket)
FROM fleet_telemetryrollup r JOIN fleet_accelerator a ON a.id = r.accelerator_id
WHERE r.width_s = 60 AND r.bucket >= %(start)s AND r.bucket < %(end)s AND r.host_id = ANY(%(hosts)s)
GROUP BY r.accelerator_id
ORDER BY r.accelerator_id
"""


@dataclass
class _GpuDays:
    """The day's GPU-days (one per GPU behind a cost row) and their minute readings."""

    gpus: list[int]  # accelerator ids
    host: list[int]
    owner: list[int | None]
    currency: list[str]
    cents: list[int]
    costed_at: list[datetime]  # when its cost row was computed: the telemetry its cost holds
    util: np.ndarray
    energy: np.ndarray


def _gpu_days(*, day: date, start: datetime, end: datetime) -> _GpuDays:
    costs = list(
        CostDaily.objects.filter(day=day)
        .order_by("host_id", "accelerator_type_id", "id")
        .values("host_id", "accelerator_type_id", "team_id", "total_cost", "currency", "computed_at")
    )
    minutes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    members: dict[tuple[int, int | None], dict[bool, list[int]]] = defaultdict(lambda: {False: [], True: []})
    with connection.cursor() as cursor:
        cursor.execute(
            _ROLLUPS_SQL, {"start": start, "end": end, "hosts": sorted({c["host_id"] for c in costs})}
        )
        for gpu, host, type_id, instance, at, util, energy in cursor.fetchall():
            members[(host, type_id)][bool(instance)].append(gpu)
            minutes[gpu] = (
                np.asarray(at, dtype=np.int64),
                np.asarray(util, dtype=np.float64),  # None -> NaN
                np.asarray(energy, dtype=np.float64),
            )
    days = _GpuDays([], [], [], [], [], [], np.empty((0, MINUTES)), np.empty((0, MINUTES)))
    for row in costs:
        group = members.get((row["host_id"], row["accelerator_type_id"]), {False: [], True: []})
        # A row's physical GPUs; only where it has none (MIG instances alone reported) its instances.
        gpus = group[False] or group[True]
        split = units_split(_cents(row["total_cost"]), [float(len(minutes[g][0])) for g in gpus])
        for gpu, cents in zip(gpus, split, strict=True):
            days.gpus.append(gpu)
            days.host.append(row["host_id"])
            days.owner.append(row["team_id"])
            days.currency.append(row["currency"])
            days.cents.append(cents)
            days.costed_at.append(row["computed_at"])
    util = np.full((len(days.gpus), MINUTES), np.nan)
    energy = np.full((len(days.gpus), MINUTES), np.nan)
    for n, gpu in enumerate(days.gpus):
        at, u, e = minutes[gpu]
        inside = (at >= 0) & (at < MINUTES)
        util[n, at[inside]] = np.clip(u[inside], 0.0, 100.0)
        energy[n, at[inside]] = np.maximum(e[inside], 0.0)
    days.util, days.energy = util, energy
    return days


@dataclass
class _Devices:
    ids: list[int]
    day: list[int]
    weight: list[float]


def _devices(*, gpu_days: _GpuDays, start: datetime, end: datetime) -> tuple[_Devices, list[tuple[Any, ...]]]:
    """The devices of each GPU-day (module docstring, 2) and the day's intervals on them."""
    gpus = Accelerator.objects.in_bulk(gpu_days.gpus)
    by_uuid = {gpus[g].uuid: n for n, g in enumerate(gpu_days.gpus)}
    instances = list(
        Accelerator.objects.filter(parent_uuid__in=list(by_uuid)).values_list(
            "id", "parent_uuid", "compute_slices"
        )
    )
    candidates = list(gpu_days.gpus) + [i[0] for i in instances]
    intervals = list(
        GpuAttribution.objects.filter(start__gte=start, start__lt=end, accelerator_id__in=candidates)
        .order_by("accelerator_id", "start", "workload_id")
        .values_list("accelerator_id", "workload_id", "start", "end", "share", "sm_util")
    )
    held = {row[0] for row in intervals}
    held_instances: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for instance, parent, slices in instances:
        if instance in held:
            held_instances[by_uuid[parent]].append((instance, slices or 1))
    devices = _Devices([], [], [])
    for n, gpu in enumerate(gpu_days.gpus):
        if held_instances[n]:
            # Instances of one day's configurations cannot hold more than their GPU: where the
            # held ones' slices pass its total (reconfigured in the day), they share it.
            total = max(gpus[gpu].compute_slices or 0, sum(s for _, s in held_instances[n]))
            for instance, slices in held_instances[n]:
                devices.ids.append(instance)
                devices.day.append(n)
                devices.weight.append(min(slices / total, 1.0))
        else:
            devices.ids.append(gpu)
            devices.day.append(n)
            devices.weight.append(1.0)
    known = set(devices.ids)
    return devices, [row for row in intervals if row[0] in known]


@dataclass(frozen=True)
class _Match:
    team: int | None
    model: str
    variant: str
    model_source: str = ""


def _matches(
    workload_ids: list[int], rule_set: RuleSet | None, served: dict[int, list[tuple[str, str, float]]]
) -> dict[int, _Match]:
    """Each workload's team and model under ``rule_set``, ``served`` the serving metrics' model
    variants on the devices it held (``selectors.workload_served_models``)."""
    checked = pure.rules_check(rule_set_rules(rule_set=rule_set) if rule_set else [])
    out = {}
    for w in Workload.objects.filter(id__in=workload_ids):
        model_name, served_variant = pure.served_model(served.get(w.pk, ())) or (None, None)
        match = pure.workload_match(
            rule_set=checked,
            workload=pure.Workload(
                namespace=w.namespace or None,
                labels=w.labels if isinstance(w.labels, dict) else {},
                account=w.account or None,
                user=w.user or None,
                model_name=model_name,
                served_variant=served_variant,
            ),
        )
        out[w.pk] = _Match(
            team=int(match.team) if match.team is not None else None,
            model=match.model or "",
            variant=match.variant or "",
            model_source=match.model_source or "",
        )
    return out


def _team_of(match: _Match | None, team_index: dict[int, int]) -> int:
    """A workload's team as ``allocate_days`` takes it: its index, -1 where no rule maps it."""
    if match is None or match.team is None:
        return -1
    return team_index[match.team]


def _day_seconds(start: datetime, costed_at: list[datetime], now: datetime) -> np.ndarray:
    """The part of each GPU-day its allocation covers: the whole day where its cost row was
    computed after the day ended; for a day costed while it ran (today, by the demo's load or an
    explicit recompute) only up to then (or ``now``, if earlier): the telemetry its cost holds,
    so that its holders' parts are of that time and not of a whole day whose cost is not in yet."""
    return np.asarray(
        [min(DAY_S, max(MINUTE_S, (min(at, now) - start).total_seconds())) for at in costed_at],
        dtype=np.float64,
    )


def _day_rows(*, day: date, rule_set: RuleSet | None) -> tuple[list[AllocationDaily], int]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    end = start + timedelta(days=1)
    gpu_days = _gpu_days(day=day, start=start, end=end)
    n = len(gpu_days.gpus)
    devices, intervals = _devices(gpu_days=gpu_days, start=start, end=end)
    workload_ids = sorted({row[1] for row in intervals})
    served = workload_served_models(start=start, end=end, device_ids=sorted(set(devices.ids)))
    matches = _matches(workload_ids, rule_set, served)
    # Workloads no longer stored (deleted): unattributed, under no id.
    position = {w: i for i, w in enumerate(workload_ids)}
    team_ids = sorted({m.team for m in matches.values() if m.team is not None})
    team_index = {t: i for i, t in enumerate(team_ids)}
    device_index = {d: i for i, d in enumerate(devices.ids)}
    now = timezone.now()
    batch = DayBatch(
        cost_cents=np.asarray(gpu_days.cents, dtype=np.int64),
        energy_j=np.nan_to_num(np.nansum(gpu_days.energy, axis=1)) if n else np.zeros(0),
        seconds=_day_seconds(start, gpu_days.costed_at, now),
        util=gpu_days.util,
        energy=gpu_days.energy,
        device_day=np.asarray(devices.day, dtype=np.int64),
        device_weight=np.asarray(devices.weight, dtype=np.float64),
        interval_device=np.asarray([device_index[r[0]] for r in intervals], dtype=np.int64),
        interval_workload=np.asarray([position[r[1]] for r in intervals], dtype=np.int64),
        interval_start=np.asarray([(r[2] - start).total_seconds() for r in intervals], dtype=np.float64),
        interval_end=np.asarray([(r[3] - start).total_seconds() for r in intervals], dtype=np.float64),
        interval_share=np.asarray([r[4] for r in intervals], dtype=np.float64),
        interval_sm_util=np.asarray([np.nan if r[5] is None else r[5] for r in intervals], dtype=np.float64),
        workload_team=np.asarray(
            [_team_of(matches.get(w), team_index) for w in workload_ids], dtype=np.int64
        ),
    )
    result = allocate_days(batch)

    def line(d: int, kind: str, amounts: np.ndarray, **fields: Any) -> AllocationDaily:
        return AllocationDaily(
            day=day,
            accelerator_id=gpu_days.gpus[d],
            host_id=gpu_days.host[d],
            owner_team_id=gpu_days.owner[d],
            kind=kind,
            cost_allocation=Decimal(int(amounts[0])).scaleb(-2),
            cost_usage=Decimal(int(amounts[1])).scaleb(-2),
            energy_allocation_j=int(amounts[2]),
            energy_usage_j=int(amounts[3]),
            currency=gpu_days.currency[d],
            rule_set=rule_set,
            computed_at=now,
            **fields,
        )

    rows = []
    unmapped = result.unattributed.copy()
    for d, w, team, amounts in zip(
        result.line_day, result.line_workload, result.line_team, result.amounts, strict=True
    ):
        workload_id = workload_ids[int(w)]
        match = matches.get(workload_id, _Match(None, "", ""))
        kind = AllocationKind.WORKLOAD if team >= 0 else AllocationKind.UNATTRIBUTED
        if team < 0:
            unmapped[d] -= amounts  # what is left is the busy time no interval covers
        rows.append(
            line(
                int(d),
                kind,
                amounts,
                workload_id=workload_id if workload_id in matches else None,
                team_id=team_ids[int(team)] if team >= 0 else None,
                model=match.model,
                variant=match.variant,
                model_source=match.model_source,
            )
        )
    for d in range(n):
        rows.append(line(d, AllocationKind.IDLE, result.idle[d]))
        if unmapped[d].any():
            rows.append(line(d, AllocationKind.UNATTRIBUTED, unmapped[d]))
    return rows, n


def _allocation_day_write(*, day: date, rule_set: RuleSet | None) -> AllocationDayResult:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_DAY, day.toordinal()])
        rows, gpu_days = _day_rows(day=day, rule_set=rule_set)
        AllocationDaily.objects.filter(day=day).delete()
        AllocationDaily.objects.bulk_create(rows, batch_size=2000)
    return AllocationDayResult(
        day=day, gpu_days=gpu_days, rows=len(rows), rule_set_version=rule_set.version if rule_set else None
    )


def allocation_day_compute(*, day: date) -> AllocationDayResult:
    """Compute (or recompute) one UTC day's allocation with the current rules (the module's
    docstring, 2); records a ``JobRun``."""
    with job_run_record(name="allocation_day_compute") as job:
        result = _allocation_day_write(day=day, rule_set=rule_set_current())
        job.rows = result.rows
        job.detail = {"day": day.isoformat(), "gpu_days": result.gpu_days, "rules": result.rule_set_version}
    return result


def allocation_days_compute(*, days: Iterable[date], record: bool = True) -> list[AllocationDayResult]:
    """Re-apply the current rules to ``days`` (the nightly pass, or an admin's explicit
    recompute of a past period): each day's rows replaced; one ``JobRun`` for the pass (none with
    ``record=False``, for a caller that records its own: the demo load)."""
    ordered = sorted(set(days))
    results = []
    with job_run_record_unless_caller(name="allocation_days_compute", record=record) as job:
        rule_set = rule_set_current()
        for day in ordered:
            results.append(_allocation_day_write(day=day, rule_set=rule_set))
        job.rows = sum(r.rows for r in results)
        job.detail = {
            "days": [d.isoformat() for d in ordered],
            "rules": rule_set.version if rule_set else None,
        }
    return results
