"""Reads of attribution: the current rules, the days whose allocation is behind their costs, the
models each workload served (the serving metrics on the devices it held), and the allocation report
(``GET /api/v1/allocation``) grouped and scoped under the cost pages' rule."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Max, Sum
from django.db.models.functions import TruncDate

from accelboard.core.access import Action, Scope
from accelboard.costs.models import CostDaily
from accelboard.serving.models import InferenceMetric

from . import rules as pure
from .allocation import units_split
from .choices import AllocationBasis, AllocationGroup, AllocationKind, IdleMode
from .models import AllocationDaily, RuleSet


def rule_set_current() -> RuleSet | None:
    """The newest version of the rules (None before any was saved: every workload unattributed)."""
    return RuleSet.objects.order_by("-version").first()


def rule_set_rules(*, rule_set: RuleSet) -> list[pure.Rule]:
    """A version's rules as ``rules.Rule`` (ids: their positions, so the older wins a tie)."""
    return [
        pure.Rule(
            id=rule.position,
            selector=rule.selector,
            value=rule.value,
            team=str(rule.team_id) if rule.team_id is not None else None,
            model=rule.model or None,
            variant=rule.variant or None,
        )
        for rule in rule_set.rules.order_by("position")
    ]


def allocation_days_stale(*, since: date, until: date) -> list[date]:
    """Days in [since, until] whose cost rows were computed after their allocation (or that have
    cost rows and no allocation, or allocation rows and no cost rows left)."""
    costed = dict(
        CostDaily.objects.filter(day__gte=since, day__lte=until)
        .values("day")
        .annotate(at=Max("computed_at"))
        .values_list("day", "at")
    )
    allocated = dict(
        AllocationDaily.objects.filter(day__gte=since, day__lte=until)
        .values("day")
        .annotate(at=Max("computed_at"))
        .values_list("day", "at")
    )
    return sorted(
        d
        for d in set(costed) | set(allocated)
        if d not in allocated or d not in costed or costed[d] > allocated[d]
    )


# The serving metrics on the devices each workload held, while it held them: a metric counts where
# its host is the device's and its ``accelerator_uuids`` name the device (the GPU, or the MIG
# instance the workload held), for the part of its interval inside the workload's; its tokens are
# weighted by that part. The day's holds and the metrics' (host, UUID) pairs are read apart and
# hash-joined on (host, UUID): the work grows with each device's holds times its metrics, not
# with the fleet's. A metric's interval is at most a day (the API's limit), hence the lookback.
_SERVED_SQL = """
WITH held AS MATERIALIZED (
    SELECT g.workload_id, g.start, g."end", a.host_id, a.uuid
    FROM fleet_gpuattribution g JOIN fleet_accelerator a ON a.id = g.accelerator_id
    WHERE g.start >= %(start)s AND g.start < %(end)s AND g.accelerator_id = ANY(%(devices)s)
), served AS MATERIALIZED (
    SELECT m.host_id, u.uuid, m.variant_id, m.interval_start AS start,
           m.interval_start + make_interval(secs => m.interval_s) AS "end", m.interval_s,
           m.generated_tokens
    FROM serving_inferencemetric m
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(m.accelerator_uuids) = 'array' THEN m.accelerator_uuids ELSE '[]' END
    ) AS u(uuid)
    WHERE m.interval_start >= %(start)s - interval '1 day' AND m.interval_start < %(end)s
      AND m.host_id IN (SELECT host_id FROM held)
)
SELECT h.workload_id, mo.name, v.name,
       sum(s.generated_tokens
           * extract(epoch FROM least(h."end", s."end") - greatest(h.start, s.start)) / s.interval_s)
FROM held h
JOIN served s ON s.host_id = h.host_id AND s.uuid = h.uuid AND s.start < h."end" AND s."end" > h.start
JOIN benchmarks_modelvariant v ON v.id = s.variant_id
JOIN benchmarks_model mo ON mo.id = v.model_id
GROUP BY h.workload_id, mo.name, v.name
"""


def workload_served_models(
    *, start: datetime, end: datetime, device_ids: list[int]
) -> dict[int, list[tuple[str, str, float]]]:
    """Per workload holding one of ``device_ids`` in [start, end) (one UTC day's intervals, as
    the allocation reads them): the model variants the serving metrics on those devices count
    while it held them, as (model name, variant name, generated tokens in its held time); for
    ``rules.served_model``. One query."""
    if not device_ids:
        return {}
    served: dict[int, list[tuple[str, str, float]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(_SERVED_SQL, {"start": start, "end": end, "devices": list(device_ids)})
        for workload_id, model, variant, tokens in cursor.fetchall():
            served[workload_id].append((model, variant, float(tokens or 0)))
    return dict(served)


# What a row is grouped by: the AllocationDaily fields behind each ``group_by``.
GROUP_FIELDS: dict[str, tuple[str, ...]] = {
    AllocationGroup.TEAM: ("team__slug",),
    AllocationGroup.NAMESPACE: ("workload__namespace",),
    AllocationGroup.WORKLOAD: ("workload__kind", "workload__uid"),
    AllocationGroup.MODEL: ("model", "variant"),
    AllocationGroup.GPU: ("accelerator__uuid",),
    # With the host's team: names are unique within a team only (``_host_keys``).
    AllocationGroup.HOST: ("host__hostname", "host__team__slug"),
}
_KIND_ORDER: dict[str, int] = {
    AllocationKind.WORKLOAD: 0,
    AllocationKind.UNATTRIBUTED: 1,
    AllocationKind.IDLE: 2,
}


@dataclass(frozen=True)
class AllocationRow:
    kind: str
    key: str | None
    cost: Decimal
    currency: str
    energy_j: int


@dataclass(frozen=True)
class AllocationTotal:
    currency: str
    cost: Decimal
    energy_j: int


@dataclass(frozen=True)
class AllocationReport:
    rows: list[AllocationRow]
    totals: list[AllocationTotal]


def _key(values: dict[str, Any], fields: tuple[str, ...]) -> str | None:
    parts = [str(values[f]) for f in fields if values[f] not in (None, "")]
    if not parts or (fields[0].startswith("workload__") and values[fields[0]] is None):
        return None
    return (":" if fields[0] == "workload__kind" else " ").join(parts)


def _host_keys(grouped: Any) -> dict[tuple[str | None, str | None], str | None]:
    """Each (host name, team slug) grouped by host as its row's key: the host's name, or
    "name (team)" where hosts of two teams the caller sees share the name, so both rows show."""
    pairs = {(values["host__hostname"], values["host__team__slug"]) for values in grouped}
    teams: dict[str | None, set[str | None]] = defaultdict(set)
    for name, slug in pairs:
        teams[name].add(slug)
    return {
        (name, slug): None
        if name in (None, "")
        else (f"{name} ({slug or 'no team'})" if len(teams[name]) > 1 else name)
        for name, slug in pairs
    }


def _idle_shared(rows: list[AllocationRow]) -> list[AllocationRow]:
    """Each currency's idle row spread over its other rows in proportion to their cost (energy:
    their energy), at the cent and the joule by the largest remainder; kept where nothing else."""
    out: list[AllocationRow] = []
    by_currency: dict[str, list[AllocationRow]] = defaultdict(list)
    for row in rows:
        by_currency[row.currency].append(row)
    for currency, group in by_currency.items():
        idle = [r for r in group if r.kind == AllocationKind.IDLE]
        others = [r for r in group if r.kind != AllocationKind.IDLE]
        if not idle or not others:
            out.extend(group)
            continue
        cents = int(sum(r.cost for r in idle) * 100)
        joules = sum(r.energy_j for r in idle)
        cost_parts = units_split(cents, [float(r.cost) for r in others])
        energy_parts = units_split(joules, [float(r.energy_j) for r in others])
        for row, c, e in zip(others, cost_parts, energy_parts, strict=True):
            out.append(
                AllocationRow(
                    kind=row.kind,
                    key=row.key,
                    cost=row.cost + Decimal(c).scaleb(-2),
                    currency=currency,
                    energy_j=row.energy_j + e,
                )
            )
    return out


def allocation_report(
    *, scope: Scope, start: date, end: date, group_by: str, basis: str, idle: str
) -> AllocationReport:
    """The allocation of [start, end] (days, inclusive) that ``scope`` may see (``VIEW_COSTS``),
    per (kind, key, currency): workload lines by ``group_by``, unattributed and idle as their own
    rows (``idle=share``: idle spread over the others). Totals per currency equal the rows'."""
    fields = GROUP_FIELDS[group_by]
    cost = "cost_allocation" if basis == AllocationBasis.ALLOCATION else "cost_usage"
    energy = "energy_allocation_j" if basis == AllocationBasis.ALLOCATION else "energy_usage_j"
    grouped = (
        AllocationDaily.objects.visible_to(scope)
        .filter(day__gte=start, day__lte=end)
        .values("kind", *fields, "currency")
        .annotate(cost=Sum(cost), energy=Sum(energy))
        .order_by()
    )
    named = _host_keys(grouped) if group_by == AllocationGroup.HOST else None
    merged: dict[tuple[str, str | None, str], list[Any]] = {}
    for values in grouped:
        row_key = (
            named[(values["host__hostname"], values["host__team__slug"])]
            if named is not None
            else _key(values, fields)
        )
        key = (values["kind"], row_key, values["currency"])
        amounts = merged.setdefault(key, [Decimal(0), 0])
        amounts[0] += values["cost"] or Decimal(0)
        amounts[1] += int(values["energy"] or 0)
    rows = [
        AllocationRow(kind=kind, key=key, cost=amounts[0], currency=currency, energy_j=amounts[1])
        for (kind, key, currency), amounts in merged.items()
    ]
    if idle == IdleMode.SHARE:
        rows = _idle_shared(rows)
    rows.sort(key=lambda r: (r.currency, _KIND_ORDER.get(r.kind, 3), r.key or ""))
    totals: dict[str, list[Any]] = {}
    for row in rows:
        total = totals.setdefault(row.currency, [Decimal(0), 0])
        total[0] += row.cost
        total[1] += row.energy_j
    return AllocationReport(
        rows=rows,
        totals=[AllocationTotal(currency=c, cost=t[0], energy_j=t[1]) for c, t in sorted(totals.items())],
    )


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def allocation_tokens(*, scope: Scope, start: date, end: date) -> dict[str, int]:
    """Generated tokens (the serving costs' per-1M basis) counted by the serving metrics ``scope``
    may view, on the hosts and days of [start, end] where the model held GPUs in the allocation
    ``scope`` may see, so that a row's cost and its tokens cover the same GPUs' days (tokens a
    model served on hosts no rule maps to it are not set against its attributed cost); keyed as
    the model grouping's rows are: ``"<model> <variant>"``, or ``"<model>"`` where the rules name
    no variant. Two queries."""
    held: dict[tuple[str, date, int], set[str]] = defaultdict(set)
    for model, variant, day, host_id in (
        AllocationDaily.objects.visible_to(scope)
        .filter(day__gte=start, day__lte=end, kind=AllocationKind.WORKLOAD)
        .exclude(model="")
        .values_list("model", "variant", "day", "host_id")
        .distinct()
    ):
        held[(model, day, host_id)].add(variant)
    served = (
        InferenceMetric.objects.visible_to(scope, Action.VIEW)
        .filter(interval_start__gte=_midnight(start), interval_start__lt=_midnight(end + timedelta(days=1)))
        .annotate(day=TruncDate("interval_start", tzinfo=UTC))
        .values("variant__model__name", "variant__name", "day", "host_id")
        .annotate(tokens=Sum("generated_tokens"))
        .order_by()
    )
    tokens: dict[str, int] = defaultdict(int)
    for values in served:
        model, variant = values["variant__model__name"], values["variant__name"]
        variants = held.get((model, values["day"], values["host_id"]), set())
        count = int(values["tokens"] or 0)
        if variant in variants:
            tokens[f"{model} {variant}"] += count
        if "" in variants:
            tokens[model] += count
    return dict(tokens)
