"""Reads of the workload pages (``/workloads/``): which workloads a caller may see, and one
workload's GPUs over time, utilisation while held, energy and cost (from ``AllocationDaily``) and
J and cost per 1M tokens where serving metrics exist for its model.

A workload is visible to whoever may view its host's team (``Workload.team``: the agent that
reported it) or the team an allocation row attributes it to; outside both it is absent (404).
Money on the page reads under the cost pages' rule (``AllocationDaily.objects.visible_to``), as
``GET /api/v1/allocation`` does, so the page's total equals the API's row for the workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Exists, Min, OuterRef, Q, QuerySet, Subquery, Sum

from accelboard.core.access import Action, Scope
from accelboard.core.models import Team
from accelboard.costs.models import CostDaily
from accelboard.fleet.models import Accelerator, GpuAttribution, Workload
from accelboard.serving.models import InferenceMetric

from .choices import AllocationKind
from .models import AllocationDaily, TrainingProgress

# The longest period one page reads (days, inclusive) and its default (ending on the last day seen).
PERIOD_MAX_DAYS = 92
PERIOD_DEFAULT_DAYS = 31
# Intervals drawn on one page: the agent merges consecutive observations, so a month of one pod
# is a handful; past this the timeline says it shows the first ones only.
TIMELINE_MAX_INTERVALS = 5_000


def _visible_ids(scope: Scope) -> Q | None:
    """The filter of the workloads ``scope`` may view; None for every workload."""
    ids = scope.team_ids(Action.VIEW)
    if ids is None:
        return None
    attributed = AllocationDaily.objects.filter(team_id__in=ids, workload__isnull=False).values("workload_id")
    return Q(team_id__in=ids) | Q(pk__in=attributed)


def workload_list(
    *, scope: Scope, team_id: int | None = None, kind: str = "", namespace: str = ""
) -> QuerySet[Workload]:
    """The workloads ``scope`` may view, newest first, each with ``attributed_team`` (the team its
    newest allocation row maps it to, None where no rule maps it or it was never allocated).
    ``team_id`` keeps those whose host is that team's or that are attributed to it."""
    queryset = Workload.objects.select_related("team")
    visible = _visible_ids(scope)
    if visible is not None:
        queryset = queryset.filter(visible)
    if team_id is not None:
        attributed = AllocationDaily.objects.filter(team_id=team_id, workload__isnull=False).values(
            "workload_id"
        )
        queryset = queryset.filter(Q(team_id=team_id) | Q(pk__in=attributed))
    if kind:
        queryset = queryset.filter(kind=kind)
    if namespace:
        queryset = queryset.filter(namespace=namespace)
    newest = AllocationDaily.objects.filter(workload_id=OuterRef("pk")).order_by("-day", "-pk")
    return queryset.annotate(
        attributed_team=Subquery(newest.values("team__name")[:1]),
        attributed_model=Subquery(newest.values("model")[:1]),
    ).order_by("-last_seen_at", "pk")


def workload_get_visible(*, scope: Scope, workload_id: int) -> Workload:
    """The workload if ``scope`` may view it; ``Workload.DoesNotExist`` otherwise (a 404). Its
    ``reports_training`` says whether it reported training progress (``training_selectors``),
    so that a page of any other workload spends no query on it."""
    queryset = Workload.objects.select_related("team").annotate(
        reports_training=Exists(TrainingProgress.objects.filter(workload_id=OuterRef("pk")))
    )
    visible = _visible_ids(scope)
    if visible is not None:
        queryset = queryset.filter(visible)
    return queryset.get(pk=workload_id)


def workload_period_default(*, workload: Workload) -> tuple[date, date]:
    """The days a page opens on: the last ``PERIOD_DEFAULT_DAYS`` up to the workload's last day
    seen, not before its first."""
    end = workload.last_seen_at.astimezone(UTC).date()
    start = max(workload.first_seen_at.astimezone(UTC).date(), end - timedelta(days=PERIOD_DEFAULT_DAYS - 1))
    return start, end


def _bounds(start: date, end: date) -> tuple[datetime, datetime]:
    return datetime.combine(start, time(), UTC), datetime.combine(end + timedelta(days=1), time(), UTC)


# --- its GPUs over time ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldInterval:
    """One interval of the workload on a device, cut to the period."""

    device: str  # "host GPU 2" or "host GPU 1 · MIG 3/7"
    start: datetime
    end: datetime
    share: float
    basis: str
    sm_util: float | None

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass
class DeviceUse:
    """The workload's use of one device over the period."""

    accelerator: Accelerator
    label: str
    host_id: int
    hostname: str
    held_s: float = 0.0  # wall-clock seconds it held the device
    device_s: float = 0.0  # ∫ share dt: device-seconds
    sm_weighted: float = 0.0  # ∫ sm_util dt over the measured part
    sm_s: float = 0.0
    gpu_util: float | None = None  # the device's (or its GPU's) mean utilisation while held

    @property
    def held_h(self) -> float:
        return self.held_s / 3600

    @property
    def device_h(self) -> float:
        return self.device_s / 3600

    @property
    def sm_util(self) -> float | None:
        return self.sm_weighted / self.sm_s if self.sm_s else None


@dataclass
class WorkloadUse:
    intervals: list[HeldInterval] = field(default_factory=list)
    devices: list[DeviceUse] = field(default_factory=list)
    truncated: bool = False

    @property
    def held_s(self) -> float:
        return sum(d.held_s for d in self.devices)

    @property
    def device_s(self) -> float:
        return sum(d.device_s for d in self.devices)

    @property
    def host_ids(self) -> list[int]:
        return sorted({d.host_id for d in self.devices})


# Minute rollups of the GPU behind each held interval (a MIG instance reads its GPU's, where NVML
# reads none, and the page then says n/a): the device's utilisation weighted by its samples.
_UTIL_SQL = """
SELECT a.accelerator_id,
       SUM(r.gpu_util_avg * r.gpu_util_samples) / NULLIF(SUM(r.gpu_util_samples), 0)
FROM fleet_gpuattribution a
JOIN fleet_telemetryrollup r
  ON r.accelerator_id = a.accelerator_id AND r.width_s = 60
 AND r.bucket >= a.start AND r.bucket < a."end"
WHERE a.workload_id = %(workload_id)s AND a.start < %(end)s AND a."end" > %(start)s
  AND r.bucket >= %(start)s AND r.bucket < %(end)s AND r.gpu_util_avg IS NOT NULL
GROUP BY a.accelerator_id
"""


def _device_label(accelerator: Accelerator, parents: dict[str, Accelerator]) -> str:
    parent = parents.get(accelerator.parent_uuid) if accelerator.parent_uuid else None
    if parent is not None:
        total = parent.compute_slices or 0
        return f"{accelerator.host.hostname} GPU {parent.index} · MIG {accelerator.compute_slices}/{total}"
    return f"{accelerator.host.hostname} GPU {accelerator.index}"


def workload_use(*, workload: Workload, start: date, end: date) -> WorkloadUse:
    """The intervals the workload held devices in over days [start, end], cut to the period, and
    per device its time held (wall clock and ∫ share dt), its own measured SM utilisation and the
    device's utilisation while held. Three queries."""
    since, until = _bounds(start, end)
    rows = list(
        GpuAttribution.objects.filter(workload_id=workload.pk, start__lt=until, end__gt=since)
        .select_related("accelerator__host")
        .order_by("start", "accelerator_id")[: TIMELINE_MAX_INTERVALS + 1]
    )
    use = WorkloadUse(truncated=len(rows) > TIMELINE_MAX_INTERVALS)
    rows = rows[:TIMELINE_MAX_INTERVALS]
    parent_uuids = {r.accelerator.parent_uuid for r in rows if r.accelerator.parent_uuid}
    parents = {a.uuid: a for a in Accelerator.objects.filter(uuid__in=parent_uuids)} if parent_uuids else {}
    devices: dict[int, DeviceUse] = {}
    for row in rows:
        accelerator = row.accelerator
        device = devices.get(accelerator.pk)
        if device is None:
            device = devices[accelerator.pk] = DeviceUse(
                accelerator=accelerator,
                label=_device_label(accelerator, parents),
                host_id=accelerator.host_id,
                hostname=accelerator.host.hostname,
            )
        held = HeldInterval(
            device=device.label,
            start=max(row.start, since),
            end=min(row.end, until),
            share=row.share,
            basis=row.basis,
            sm_util=row.sm_util,
        )
        use.intervals.append(held)
        device.held_s += held.seconds
        device.device_s += held.share * held.seconds
        if held.sm_util is not None:
            device.sm_weighted += held.sm_util * held.seconds
            device.sm_s += held.seconds
    if devices:
        with connection.cursor() as cursor:
            cursor.execute(_UTIL_SQL, {"workload_id": workload.pk, "start": since, "end": until})
            for accelerator_id, util in cursor.fetchall():
                if accelerator_id in devices and util is not None:
                    devices[accelerator_id].gpu_util = float(util)
    use.devices = sorted(devices.values(), key=lambda d: d.label)
    return use


# --- energy and cost (AllocationDaily) ---------------------------------------------------------------


@dataclass(frozen=True)
class Money:
    """Cost and energy on both bases, in one currency."""

    currency: str
    cost_allocation: Decimal
    cost_usage: Decimal
    energy_allocation_j: int
    energy_usage_j: int

    @property
    def kwh_allocation(self) -> float:
        return self.energy_allocation_j / 3.6e6

    @property
    def kwh_usage(self) -> float:
        return self.energy_usage_j / 3.6e6


@dataclass(frozen=True)
class DayMoney:
    day: date
    money: Money
    computed_at: datetime | None = None

    @property
    def partial_until(self) -> datetime | None:
        """When the day's allocation (or, earlier, its hosts' cost) was computed, where that was
        before the day ended: it then holds the day's cost and telemetry up to that time only (the demo's load, or a
        recompute of today), until the nightly pass allocates the whole day."""
        end = datetime.combine(self.day + timedelta(days=1), time(), UTC)
        return self.computed_at if self.computed_at is not None and self.computed_at < end else None


@dataclass(frozen=True)
class Attribution:
    """What the newest allocation row of the period says of the workload: mapped (a team) or
    unattributed, the model and variant, and the rule version."""

    kind: str
    team: str | None
    model: str
    variant: str
    rule_version: int | None


@dataclass
class WorkloadMoney:
    totals: list[Money] = field(default_factory=list)
    days: list[DayMoney] = field(default_factory=list)
    attribution: Attribution | None = None

    @property
    def partial_days(self) -> list[DayMoney]:
        return [d for d in self.days if d.partial_until is not None]


_SUMS = {
    "ca": Sum("cost_allocation"),
    "cu": Sum("cost_usage"),
    "ea": Sum("energy_allocation_j"),
    "eu": Sum("energy_usage_j"),
}


def _money(currency: str, values: Mapping[str, Any]) -> Money:
    return Money(
        currency=currency,
        cost_allocation=Decimal(str(values["ca"] or 0)),
        cost_usage=Decimal(str(values["cu"] or 0)),
        energy_allocation_j=int(str(values["ea"] or 0)),
        energy_usage_j=int(str(values["eu"] or 0)),
    )


def workload_money(*, scope: Scope, workload: Workload, start: date, end: date) -> WorkloadMoney:
    """The workload's allocation rows of days [start, end] that ``scope`` may see (the cost pages'
    rule), per day and per currency, on both bases; the newest row's mapping. Three queries (four
    where a day was allocated before it ended)."""
    rows = AllocationDaily.objects.visible_to(scope).filter(workload=workload, day__gte=start, day__lte=end)
    out = WorkloadMoney()
    for values in rows.values("currency").annotate(**_SUMS).order_by("currency"):
        out.totals.append(_money(values["currency"], values))
    by_day = (
        rows.values("day", "currency")
        .annotate(**_SUMS, computed=Min("computed_at"))
        .order_by("day", "currency")
    )
    for values in by_day:
        out.days.append(
            DayMoney(
                day=values["day"], money=_money(values["currency"], values), computed_at=values["computed"]
            )
        )
    # A day costed while it ran holds the telemetry up to its cost rows' time, which may be
    # before its allocation's: its hosts' earliest (one query, only where a day is partial).
    partial = sorted({d.day for d in out.partial_days})
    if partial:
        costed = dict(
            CostDaily.objects.filter(
                day__in=partial, host_id__in=rows.filter(day__in=partial).values("host_id")
            )
            .values("day")
            .annotate(at=Min("computed_at"))
            .values_list("day", "at")
        )
        out.days = [
            replace(d, computed_at=min(d.computed_at, costed[d.day]))
            if d.computed_at is not None and d.day in costed
            else d
            for d in out.days
        ]
    newest = rows.select_related("team", "rule_set").order_by("-day", "-pk").first()
    if newest is not None:
        out.attribution = Attribution(
            kind=newest.kind,
            team=newest.team.name if newest.team is not None else None,
            model=newest.model,
            variant=newest.variant,
            rule_version=newest.rule_set.version if newest.rule_set is not None else None,
        )
    return out


# --- per 1M tokens ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenCost:
    """J and cost per 1M generated tokens of the workload's model on the hosts it ran on.

    Both sides are the model's on those hosts over the period: its workloads' allocated energy and
    cost (both bases) over the tokens its serving metrics counted there. Where the workload is the
    model's only one there, that is the workload's own figure; ``workloads`` says how many."""

    model: str
    variant: str
    tokens: int
    workloads: int
    money: list[Money]

    def per_million(self, value: Decimal | int) -> Decimal:
        return Decimal(value) * 1_000_000 / self.tokens


@dataclass(frozen=True)
class TokenCostRow:
    currency: str
    j_allocation: Decimal
    j_usage: Decimal
    cost_allocation: Decimal
    cost_usage: Decimal


def token_cost_rows(token_cost: TokenCost) -> list[TokenCostRow]:
    """Each currency's J and cost per 1M tokens on both bases (J to the joule, money to 0.0001)."""
    joule, money = Decimal(1), Decimal("0.0001")
    return [
        TokenCostRow(
            currency=m.currency,
            j_allocation=token_cost.per_million(m.energy_allocation_j).quantize(joule),
            j_usage=token_cost.per_million(m.energy_usage_j).quantize(joule),
            cost_allocation=token_cost.per_million(m.cost_allocation).quantize(money),
            cost_usage=token_cost.per_million(m.cost_usage).quantize(money),
        )
        for m in token_cost.money
    ]


def workload_token_cost(
    *, scope: Scope, model: str, variant: str, host_ids: list[int], start: date, end: date
) -> TokenCost | None:
    """The model's J and cost per 1M tokens on ``host_ids`` over days [start, end]; None where it
    has no serving metrics there (no tokens: the page says n/a, never a made-up number)."""
    if not model or not host_ids:
        return None
    since, until = _bounds(start, end)
    metrics = scope.filter(
        InferenceMetric.objects.filter(
            variant__model__name=model,
            host_id__in=host_ids,
            interval_start__gte=since,
            interval_start__lt=until,
        )
    )
    if variant:
        metrics = metrics.filter(variant__name=variant)
    tokens = int(metrics.aggregate(tokens=Sum("generated_tokens"))["tokens"] or 0)
    if tokens <= 0:
        return None
    rows = AllocationDaily.objects.visible_to(scope).filter(
        kind=AllocationKind.WORKLOAD, model=model, host_id__in=host_ids, day__gte=start, day__lte=end
    )
    if variant:
        rows = rows.filter(variant=variant)
    money = [
        _money(values["currency"], values)
        for values in rows.values("currency").annotate(**_SUMS).order_by("currency")
    ]
    workloads = rows.values("workload_id").distinct().count()
    return TokenCost(model=model, variant=variant, tokens=tokens, workloads=workloads, money=money)


def workload_namespaces(*, scope: Scope) -> list[str]:
    """The namespaces of the workloads ``scope`` may view, for the list's filter."""
    queryset = Workload.objects.exclude(namespace="")
    visible = _visible_ids(scope)
    if visible is not None:
        queryset = queryset.filter(visible)
    return list(queryset.values_list("namespace", flat=True).distinct().order_by("namespace"))


def workload_filter_team(*, slug: str) -> Team | None:
    """The team a workload list is filtered by (the host's team or the team a rule gives it; the
    list itself is scoped, so a team shows only the workloads the caller may see)."""
    return Team.objects.filter(slug=slug).first()
