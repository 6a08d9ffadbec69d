"""Reads that gather a capacity plan's inputs, each as the plain dataclasses of :mod:`.capacity`.

- **Traffic**: ``serving.InferenceMetric`` of the model (every host and variant the caller may
  see) summed per bucket of ``PLAN_BUCKET_S`` (or the metrics' own interval when longer) in
  PostgreSQL, so a month of 5-minute intervals comes back as ~3 000 rows.
- **Benchmarks**: the configurations of the hardware page (``benchmarks.config_selectors`` and
  ``benchmarks.configurations``), every scenario.
- **Prices**: the price book (``costs``) under the user's basis: for each accelerator type the
  cheapest row per GPU-hour valid today among the provider/region and pricing model asked; the
  electricity (price per kWh, PUE, grid carbon) of a site of the same provider and region, else
  the region's carbon intensity (no energy price: it is in the cloud's price).
- **Accuracy**: the drift app's verdict per variant (``drift.selectors.drift_evaluate``).
- **Objective**: the team's serving SLO (``alerts.ServingSlo``, p99 end-to-end), the strictest
  of the caller's teams for the model.
- **Today**: the GPUs the serving metrics of the last day name, and the serving cost tables
  (``costs.selectors.serving_costs_for``) over the window.

Team scope: a plan is a cost figure, so every read here takes the caller's ``Scope`` and reads
under the cost pages' rule (``Scope.viewing_where(Action.VIEW_COSTS)``): finance members and staff
plan every team's traffic, anyone else their own teams'.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import DateTimeField, F, FloatField, Func, Max, Q, Sum, Value

from accelboard.alerts.models import ServingSlo
from accelboard.benchmarks.config_selectors import config_run_figures
from accelboard.benchmarks.configurations import ConfigPoint, config_points_build
from accelboard.benchmarks.models import Model, ModelVariant
from accelboard.core.access import NOBODY, Action, Scope, scope_for_team
from accelboard.core.models import Team
from accelboard.costs.formulas.money import as_decimal
from accelboard.costs.gaps import cost_gap
from accelboard.costs.models import AcceleratorPrice, CarbonIntensity, ElectricityPrice
from accelboard.costs.pricebook_selectors import (
    accelerator_rate_value,
    electricity_rate_value,
    exchange_rates_on,
)
from accelboard.costs.report_selectors import rates_load
from accelboard.costs.selectors import serving_cost_gap, serving_costs_for, serving_price_bases
from accelboard.drift import computation as drift_computation
from accelboard.drift.selectors import accuracy_values, drift_evaluate
from accelboard.fleet.models import Accelerator, AcceleratorType
from accelboard.serving.models import InferenceMetric

from . import capacity as c
from . import plan_inputs as pi
from .models import PlanScenario

# Traffic is read in buckets of this width (or the serving interval, when longer): the busiest
# quarter hour is what the fleet must carry; shorter bursts are the headroom's job.
PLAN_BUCKET_S = 900
# Accuracy results older than this before the latest one do not change a drift verdict.
ACCURACY_HISTORY = timedelta(days=60)
# "Today" is what the serving metrics of this last stretch name.
CURRENT_LOOKBACK = timedelta(days=1)

ANY = ""


def plan_scope(scope: Scope) -> Scope:
    """What a plan reads for the caller: the teams whose costs they see (idempotent)."""
    return scope.viewing_where(Action.VIEW_COSTS)


# --- Which models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanModel:
    model_id: int
    name: str
    requests: int
    generated_tokens: int
    team_id: int  # the team with the most requests of it: whose plan a saved scenario is
    interval_s: int  # the widest serving interval reported


def _busiest_team(requests_by_team: dict[int, int]) -> int:
    """The team with the most requests (the lowest id on a tie)."""
    return min(requests_by_team, key=lambda team: (-requests_by_team[team], team))


def plan_models(*, scope: Scope, start: datetime, end: datetime) -> list[PlanModel]:
    """Models with production traffic in [start, end) the caller may plan, busiest first (one
    query, grouped by model and team)."""
    rows = (
        InferenceMetric.objects.visible_to(plan_scope(scope))
        .filter(interval_start__gte=start, interval_start__lt=end)
        .values("variant__model_id", "variant__model__name", "team_id")
        .annotate(requests=Sum("requests"), tokens=Sum("generated_tokens"), widest=Max("interval_s"))
        .order_by()
    )
    by_model: dict[int, dict[str, Any]] = {}
    for row in rows:
        entry = by_model.setdefault(
            row["variant__model_id"],
            {"name": row["variant__model__name"], "requests": 0, "tokens": 0, "teams": {}, "widest": 0},
        )
        entry["requests"] += row["requests"] or 0
        entry["tokens"] += row["tokens"] or 0
        entry["teams"][row["team_id"]] = row["requests"] or 0
        entry["widest"] = max(entry["widest"], row["widest"] or 0)
    models = [
        PlanModel(
            model_id=model_id,
            name=entry["name"],
            requests=entry["requests"],
            generated_tokens=entry["tokens"],
            team_id=_busiest_team(entry["teams"]),
            interval_s=entry["widest"],
        )
        for model_id, entry in by_model.items()
    ]
    models.sort(key=lambda m: (-m.generated_tokens, m.name))
    return models


# --- Traffic -----------------------------------------------------------------------------------


class _DateBin(Func):
    """PostgreSQL's ``date_bin(stride, source, origin)``: the bucket a timestamp falls in."""

    function = "date_bin"
    output_field = DateTimeField()


class _Epoch(Func):
    """``EXTRACT(EPOCH FROM ts)``: seconds since 1970 as a number."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


def plan_bucket_s(*, interval_s: int) -> int:
    """The bucket the traffic is read in: ``PLAN_BUCKET_S``, or the serving interval when longer."""
    return max(PLAN_BUCKET_S, int(interval_s or 0))


def plan_traffic(
    *, scope: Scope, model_id: int, start: datetime, end: datetime, bucket_s: int
) -> pi.TrafficShape:
    """The model's traffic shape over [start, end) in buckets of ``bucket_s`` (one query)."""
    metrics = InferenceMetric.objects.visible_to(plan_scope(scope)).filter(
        variant__model_id=model_id, interval_start__gte=start, interval_start__lt=end
    )
    rows = (
        metrics.annotate(
            # Epoch seconds: a month of buckets parses as numbers, not as thousands of timestamps.
            bucket=_Epoch(_DateBin(Value(timedelta(seconds=bucket_s)), F("interval_start"), Value(start)))
        )
        .values("bucket")
        .annotate(requests=Sum("requests"), prompt=Sum("prompt_tokens"), generated=Sum("generated_tokens"))
        .order_by("bucket")
    )
    buckets = [
        pi.TrafficBucket(
            start=datetime.fromtimestamp(float(row["bucket"]), UTC),
            width_s=bucket_s,
            requests=row["requests"] or 0,
            prompt_tokens=row["prompt"] or 0,
            generated_tokens=row["generated"] or 0,
        )
        for row in rows
    ]
    return pi.traffic_shape_build(buckets=buckets, window_start=start, window_end=end, bucket_s=bucket_s)


# --- Benchmarks --------------------------------------------------------------------------------


def plan_config_points(*, scope: Scope, model_id: int) -> list[ConfigPoint]:
    """Every configuration of the model in every scenario, medians of their last runs."""
    return config_points_build(runs=config_run_figures(scope=plan_scope(scope), model_id=model_id))


def board_power_by_slug(*, slugs: list[str]) -> dict[str, float]:
    return {
        slug: power
        for slug, power in AcceleratorType.objects.filter(slug__in=slugs).values_list("slug", "board_power_w")
        if power
    }


# --- Prices ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceBasis:
    """What the user chose: ``where`` is "" (anywhere), "provider" or "provider/region";
    ``pricing`` is "" (any pricing model) or one of on-demand, reserved, spot, on-prem."""

    where: str = ANY
    pricing: str = ANY

    def admits(self, row: AcceleratorPrice) -> bool:
        if self.pricing and row.pricing_model != self.pricing:
            return False
        if not self.where:
            return True
        provider, _, region = self.where.partition("/")
        return row.provider == provider and (not region or row.region == region)

    @property
    def text(self) -> str:
        where = self.where.replace("/", " ") if self.where else "any provider and region"
        pricing = self.pricing or "any pricing model"
        return f"cheapest per GPU-hour, {where}, {pricing}"


def _valid(row: Any, day: date) -> bool:
    return row.valid_from <= day and (row.valid_to is None or day < row.valid_to)


def price_rows_valid(*, today: date) -> list[AcceleratorPrice]:
    """Every accelerator price valid today (one query)."""
    rows = AcceleratorPrice.objects.filter(valid_from__lte=today).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=today)
    )
    return list(rows.select_related("accelerator_type"))


def price_basis_choices(
    *, rows: list[AcceleratorPrice]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(where, pricing) choices from the rows valid today: providers, then provider/region."""
    providers = sorted({r.provider for r in rows})
    regions = sorted({(r.provider, r.region) for r in rows if r.region})
    where = [(ANY, "Anywhere (cheapest)")]
    for provider in providers:
        where.append((provider, provider))
        where += [(f"{p}/{region}", f"{p} · {region}") for p, region in regions if p == provider]
    models = sorted({r.pricing_model for r in rows})
    return where, [(ANY, "Any (cheapest)"), *[(m, m) for m in models]]


def plan_prices(
    *, rows: list[AcceleratorPrice], slugs: list[str], basis: PriceBasis, today: date
) -> tuple[dict[str, pi.OptionPrice], str, tuple[Any, ...]]:
    """For each slug the cheapest admitted row per GPU-hour (latest ``valid_from`` on a tie), with
    its electricity; the plan's currency (the one most chosen rows use) and its exchange rates.
    Three queries (electricity, carbon, rates) after the rows."""
    chosen: dict[str, AcceleratorPrice] = {}
    for row in rows:
        slug = row.accelerator_type.slug
        if slug not in slugs or not basis.admits(row) or row.price_per_hour <= 0:
            continue
        best = chosen.get(slug)
        key = (row.price_per_accelerator_hour, -row.valid_from.toordinal())
        if best is None or key < (best.price_per_accelerator_hour, -best.valid_from.toordinal()):
            chosen[slug] = row
    places = {(row.provider, row.region) for row in chosen.values()}
    electricity: dict[tuple[str, str], ElectricityPrice] = {}
    for power in ElectricityPrice.objects.filter(
        site__provider__in={p for p, _ in places}, site__region__in={r for _, r in places}
    ).select_related("site"):
        place = (power.site.provider, power.site.region)
        if _valid(power, today) and (
            place not in electricity or power.valid_from > electricity[place].valid_from
        ):
            electricity[place] = power
    carbon: dict[tuple[str, str], CarbonIntensity] = {}
    for grid in CarbonIntensity.objects.filter(
        provider__in={p for p, _ in places}, region__in={r for _, r in places}
    ):
        place = (grid.provider, grid.region)
        if _valid(grid, today) and (place not in carbon or grid.valid_from > carbon[place].valid_from):
            carbon[place] = grid
    currencies = Counter(row.currency for row in chosen.values())
    currency = min(currencies, key=lambda code: (-currencies[code], code)) if currencies else "USD"
    prices = {
        slug: pi.OptionPrice(
            rate=accelerator_rate_value(row, today=today),
            instance_gpus=max(row.accelerator_count, 1),
            instance_price_per_hour=Decimal(row.price_per_hour),
            provider=row.provider,
            region=row.region,
            instance_type=row.instance_type,
            pricing_model=row.pricing_model,
            electricity=electricity_rate_value(
                electricity=electricity.get((row.provider, row.region)),
                carbon=carbon.get((row.provider, row.region)),
                today=today,
            ),
        )
        for slug, row in chosen.items()
    }
    others = {row.currency for row in chosen.values()} | {
        price.electricity.currency
        for price in prices.values()
        if price.electricity and price.electricity.currency
    }
    rates = tuple(exchange_rates_on(at=today, currencies=others - {currency})) if others - {currency} else ()
    return prices, currency, rates


# --- Accuracy ----------------------------------------------------------------------------------


def plan_accuracy(*, scope: Scope, model_id: int) -> dict[str, pi.Accuracy]:
    """Per variant, its worst accuracy task against the reference (the reference itself: 0)."""
    scope = plan_scope(scope)
    rows = accuracy_values(scope=scope, model_ids=[model_id])
    if rows:
        # The verdict reads the last few weeks (level: 3 days, trend: 21, pairs up to 14 days
        # apart); older results only cost pairing time.
        since = rows[-1]["measured_at"] - ACCURACY_HISTORY
        rows = [row for row in rows if row["measured_at"] >= since]
    drift = drift_evaluate(scope=scope, model_ids=[model_id], change_points=False, rows=rows).get(model_id)
    if drift is None or drift.reference is None:
        return {}
    result = {
        drift.reference.name: pi.Accuracy(reference=drift.reference.name, loss=0.0, verdict="reference")
    }
    by_variant: dict[str, list[Any]] = defaultdict(list)
    for task in drift.tasks:
        if task.level is not None:
            by_variant[task.variant_name].append(task)
    for name, tasks in by_variant.items():
        worst = max(tasks, key=lambda t: (-drift_computation.VERDICT_ORDER[t.verdict], t.level))
        result[name] = pi.Accuracy(
            reference=drift.reference.name,
            loss=worst.level,
            budget=worst.budget,
            verdict=worst.verdict,
            task=worst.task,
        )
    return result


# --- Objective ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectiveDefault:
    e2e_p99_ms: float | None
    source: str


def plan_objective_default(*, scope: Scope, model_id: int) -> ObjectiveDefault:
    """The strictest p99 latency SLO the caller's teams set for the model (any variant)."""
    slo = (
        plan_scope(scope)
        .filter(ServingSlo.objects.filter(model_id=model_id, p99_latency_ms__isnull=False))
        .select_related("team", "variant")
        .order_by("p99_latency_ms", "variant_id")
        .first()
    )
    if slo is None:
        return ObjectiveDefault(e2e_p99_ms=None, source="")
    which = f" ({slo.variant.name})" if slo.variant is not None else ""
    return ObjectiveDefault(e2e_p99_ms=slo.p99_latency_ms, source=f"{slo.team.name}'s serving SLO{which}")


# --- Today -------------------------------------------------------------------------------------


def plan_current(
    *, scope: Scope, model_id: int, start: datetime, end: datetime, currency: str
) -> pi.CurrentDeployment | None:
    """The GPUs serving the model in the last day of the window, and what they cost a month: the
    cost per GPU-hour of the window's serving-cost rows (converted into ``currency`` where a rate
    exists) × those GPUs × 730 h."""
    scope = plan_scope(scope)
    recent = InferenceMetric.objects.visible_to(scope).filter(
        variant__model_id=model_id, interval_start__gte=end - CURRENT_LOOKBACK, interval_start__lt=end
    )
    uuids: set[str] = set()
    variants: set[str] = set()
    for name, listed in recent.values_list("variant__name", "accelerator_uuids").distinct():
        variants.add(name)
        uuids.update(listed or [])
    if not uuids:
        return None
    types = Counter(
        Accelerator.objects.filter(uuid__in=uuids)
        .exclude(accelerator_type=None)
        .values_list("accelerator_type__slug", "accelerator_type__name")
    )
    hardware = " + ".join(f"{n}× {name}" for (_slug, name), n in sorted(types.items(), key=lambda t: t[0][1]))
    variant_ids = list(ModelVariant.objects.filter(model_id=model_id).values_list("id", flat=True))
    costs = serving_costs_for(scope=scope, start=start.date(), end=end.date(), variant_ids=variant_ids)
    rates = rates_load(currency=currency)
    total = Decimal(0)
    capacity = Decimal(0)
    gpu_hours = 0.0
    tokens = 0
    days: set[date] = set()
    unconverted = False
    for row in costs:
        if row["cost"] is None or not row["gpu_hours"]:
            continue
        factor = rates.factor(currency=row["currency"], day=row["day"])
        if factor is None:
            unconverted = True
            continue
        total += row["cost"] * as_decimal(factor)
        capacity += (row["capacity_cost"] or Decimal(0)) * as_decimal(factor)
        gpu_hours += row["gpu_hours"]
        tokens += row["generated_tokens"] or 0
        days.add(row["day"])
    gap = None
    if unconverted:
        currencies = sorted({row["currency"] for row in costs if row["cost"] is not None} - {currency})
        gap = cost_gap(
            subject="the model's serving",
            host="",
            accelerator="",
            price_found=True,
            rate_found=False,
            currency=", ".join(currencies),
            to_currency=currency,
        )
    elif not gpu_hours:
        gap = serving_cost_gap(scope=scope, start=start.date(), end=end.date(), variant_ids=variant_ids)
    # What today's GPUs cost per GPU-hour in the cost tables, held for a month: partial days (the
    # window's first, an agent outage) weigh by their hours instead of counting as whole days.
    monthly = (
        total / as_decimal(gpu_hours) * len(uuids) * as_decimal(c.HOURS_PER_MONTH)
        if gpu_hours and not unconverted
        else None
    )
    return pi.CurrentDeployment(
        gpus=len(uuids),
        hardware=hardware or f"{len(uuids)} GPU{'s' if len(uuids) != 1 else ''}",
        variants=tuple(sorted(variants)),
        accelerator_slugs=tuple(sorted({slug for slug, _name in types})),
        monthly_cost=monthly,
        currency=currency,
        cost_days=len(days),
        cost_per_1m=total / tokens * 1_000_000 if tokens and monthly is not None else None,
        cost_gap=gap if monthly is None else None,
        capacity_monthly=(
            capacity / as_decimal(gpu_hours) * len(uuids) * as_decimal(c.HOURS_PER_MONTH)
            if monthly is not None
            else None
        ),
        price_basis="; ".join(
            serving_price_bases(scope=scope, start=start.date(), end=end.date(), variant_ids=variant_ids)
        ),
    )


# --- Saved scenarios ---------------------------------------------------------------------------


def scenarios_for(*, scope: Scope, model_id: int | None = None) -> list[PlanScenario]:
    """The saved plans the caller may see (of one model), newest first, 50 at most."""
    scenarios = PlanScenario.objects.visible_to(plan_scope(scope)).select_related(
        "team", "model", "created_by"
    )
    if model_id is not None:
        scenarios = scenarios.filter(model_id=model_id)
    return list(scenarios[:50])


def scenario_get(*, scope: Scope, scenario_id: int) -> PlanScenario | None:
    """A saved plan the caller may see (None otherwise: a 404)."""
    return (
        PlanScenario.objects.visible_to(plan_scope(scope))
        .select_related("team", "model", "created_by")
        .filter(pk=scenario_id)
        .first()
    )


@dataclass(frozen=True)
class MonthActual:
    month: date
    days: int  # days with serving costs
    actual_cost: float | None
    planned_cost: float | None  # the plan's monthly figure for those days
    actual_tokens: int
    planned_tokens: float | None

    @property
    def difference(self) -> float | None:
        if self.actual_cost is None or self.planned_cost is None:
            return None
        return self.actual_cost - self.planned_cost

    @property
    def difference_pct(self) -> float | None:
        if self.difference is None or not self.planned_cost:
            return None
        return self.difference / self.planned_cost


def _month_start(day: date) -> date:
    return day.replace(day=1)


def scenario_actuals(*, scenario: PlanScenario, scope: Scope, today: date) -> list[MonthActual]:
    """Each month from the scenario's to today's: what the model's serving cost and served in the
    scenario's team (the cost tables), against the plan's monthly figure prorated to the days
    that have costs (none when the caller may not see that team's costs)."""
    first = _month_start(scenario.created_at.date())
    # The scenario's team alone, as far as the caller sees it.
    team_costs = (
        scope_for_team(scenario.team_id, (Action.VIEW_COSTS,))
        if plan_scope(scope).can(Action.VIEW_COSTS, scenario.team_id)
        else NOBODY
    )
    variant_ids = list(ModelVariant.objects.filter(model_id=scenario.model_id).values_list("id", flat=True))
    rows = serving_costs_for(
        scope=team_costs, start=first, end=today + timedelta(days=1), variant_ids=variant_ids
    )
    rates = rates_load(currency=scenario.currency or "USD")
    months: dict[date, dict[str, Any]] = {}
    month = first
    while month <= today:
        months[month] = {"cost": 0.0, "tokens": 0, "days": set(), "unconverted": False}
        month = (month + timedelta(days=32)).replace(day=1)
    for row in rows:
        entry = months.get(_month_start(row["day"]))
        if entry is None:
            continue
        entry["tokens"] += row["generated_tokens"] or 0
        entry["days"].add(row["day"])
        if row["cost"] is None:
            continue
        factor = rates.factor(currency=row["currency"], day=row["day"])
        if factor is None:
            entry["unconverted"] = True
        else:
            entry["cost"] += float(row["cost"] * factor)
    planned = float(scenario.planned_monthly) if scenario.planned_monthly is not None else None
    result = []
    for month, entry in months.items():
        days = len(entry["days"])
        share = days / pi.DAYS_PER_MONTH
        result.append(
            MonthActual(
                month=month,
                days=days,
                actual_cost=None if entry["unconverted"] or not days else entry["cost"],
                planned_cost=planned * share if planned is not None and days else None,
                actual_tokens=entry["tokens"],
                planned_tokens=scenario.planned_tokens_monthly * share
                if scenario.planned_tokens_monthly is not None and days
                else None,
            )
        )
    return result


def model_get(*, model_id: int) -> Model | None:
    return Model.objects.filter(pk=model_id).first()


def team_get(*, team_id: int) -> Team | None:
    return Team.objects.filter(pk=team_id).first()
