"""Reads of the costs app for the finance pages, exports and other apps.

Every function takes the caller's ``Scope`` (``accelboard.core.access``) and reads under the one
rule for money (``Action.VIEW_COSTS``: finance members see every team's costs, on the overview as
on the finance pages; anyone else the teams they are in), from the precomputed tables (``CostDaily``,
``ServingCostDaily``, ``RunCost``) with a fixed number of queries, grouped in SQL: a page's cost
grows with what it draws (groups), not with the rows behind them.

Money comes back as ``Decimal`` in the asked ``currency``. Sums in another currency are
converted with a price-book ``ExchangeRate`` valid on the period's last day; without one they
are NOT converted: they are returned apart in ``unconverted`` and the page must show them so.

The monthly report and its drill-down have their own modules (``report_selectors``,
``drill_selectors``); this one serves the other pages: per-day totals and the daily spend series
(the overview), per-run and serving costs, and the price book.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.access import Action, Scope

from .gaps import CostGap, cost_gap, cost_gap_from_flags
from .models import AcceleratorPrice, CostDaily, ElectricityPrice, ExchangeRate, RunCost, ServingCostDaily
from .pricebook_selectors import carbon_for_host, electricity_for_host, price_book_load, price_for_host

__all__ = [
    "BREAKDOWNS",
    "carbon_for_host",
    "cost_daily_series",
    "cost_days_totals",
    "electricity_for_host",
    "price_book_rows",
    "price_for_host",
    "price_basis",
    "run_cost_gaps",
    "serving_cost_gap",
    "serving_price_bases",
    "run_cost_summary",
    "run_costs_for",
    "serving_costs_for",
]

MONEY_FIELDS = ("capacity_cost", "usage_cost", "idle_cost", "energy_cost", "total_cost")
QUANTITY_FIELDS = ("alloc_hours", "busy_hours", "idle_hours", "energy_kwh", "energy_kwh_pue", "carbon_kg")
# by -> (column grouped on, label column)
BREAKDOWNS: dict[str, tuple[str, str]] = {
    "team": ("team_id", "team__name"),
    "project": ("project", "project"),
    "accelerator_type": ("accelerator_type_id", "accelerator_type__name"),
    "provider": ("provider", "provider"),
    "host": ("host_id", "host__hostname"),
    "model": ("variant__model_id", "variant__model__name"),
}
FILTERS = ("team_id", "project", "accelerator_type_id", "provider", "host_id", "day", "region")


def _daily(
    *, scope: Scope, start: date, end: date, filters: Mapping[str, Any] | None = None
) -> QuerySet[CostDaily]:
    qs = CostDaily.objects.visible_to(scope, Action.VIEW_COSTS).filter(day__gte=start, day__lt=end)
    for key, value in (filters or {}).items():
        if key not in FILTERS:
            raise ValueError(f"filters: {key!r} is not one of {', '.join(FILTERS)}")
        if value not in (None, ""):
            qs = qs.filter(**{key: value})
    return qs


class _Converter:
    """Converts per-currency sums to one currency with the book's rates valid on ``on``."""

    def __init__(self, *, currency: str, on: date) -> None:
        self.currency = currency
        self.factors: dict[str, tuple[Decimal, int]] = {currency: (Decimal(1), 0)}
        for r in ExchangeRate.objects.filter(Q(from_currency=currency) | Q(to_currency=currency)):
            if not (r.valid_from <= on and (r.valid_to is None or on < r.valid_to)):
                continue
            if r.to_currency == currency:
                self.factors.setdefault(r.from_currency, (Decimal(r.rate), r.pk))
            else:
                self.factors.setdefault(r.to_currency, (Decimal(1) / Decimal(r.rate), r.pk))

    def convert(self, amount: Decimal | None, currency: str) -> Decimal | None:
        if amount is None:
            return None
        if currency in self.factors:
            return (amount * self.factors[currency][0]).quantize(Decimal("0.0001"))
        return None


def _fold(groups: list[dict], key: str | None, conv: _Converter) -> tuple[dict, list[dict]]:
    """Sum rows grouped by (key, currency) into one currency; return per-key totals and what
    could not be converted."""
    out: dict[Any, dict[str, Any]] = {}
    unconverted: list[dict] = []
    for g in groups:
        k = g.get(key) if key else None
        slot = out.setdefault(
            k,
            {
                **{f: Decimal(0) for f in MONEY_FIELDS},
                **{f: 0.0 for f in QUANTITY_FIELDS},
                "stale_rows": 0,
                "rows": 0,
            },
        )
        for f in QUANTITY_FIELDS:
            slot[f] += g[f] or 0.0
        slot["stale_rows"] += g["stale_rows"]
        slot["rows"] += g["rows"]
        currency = g["currency"]
        if currency and currency not in conv.factors:
            unconverted.append({"key": k, "currency": currency, **{f: g[f] for f in MONEY_FIELDS}})
            continue
        for f in MONEY_FIELDS:
            value = conv.convert(g[f], currency or conv.currency)
            slot[f] += value or Decimal(0)
    return out, unconverted


def _group(qs: QuerySet, *keys: str) -> list[dict]:
    # Aggregates cannot reuse a field's name in annotate(): sum as "sum_<field>", then rename.
    # Ordered by the keys: a grouped query's rows come in any order (a hash aggregate), and what
    # is listed from them (the unconverted currencies of each day) must read the same every time.
    groups = (
        qs.values(*keys, "currency")
        .annotate(
            **{f"sum_{f}": Sum(f) for f in QUANTITY_FIELDS},
            # The parts of spend only where there is a spend (as the report counts them).
            **{f"sum_{f}": Sum(f, filter=Q(total_cost__isnull=False)) for f in MONEY_FIELDS},
            stale_rows=Count("id", filter=Q(price_stale=True)),
            unpriced_hours=Sum("alloc_hours", filter=Q(total_cost=None)),
            rows=Count("id"),
        )
        .order_by(*keys, "currency")
    )
    return [{k.removeprefix("sum_"): v for k, v in g.items()} for g in groups]


def cost_daily_series(
    *,
    scope: Scope,
    start: date,
    end: date,
    by: str = "team",
    currency: str = "USD",
    filters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Spend per day in [start, end) split by ``by`` (for a stacked chart): ``days`` (every day
    of the range, gaps as 0) and ``series`` [{key, label, values: [Decimal per day]}]. One query."""
    if by not in BREAKDOWNS or by == "model":
        raise ValueError(f"by: {by!r} is not one of team, project, accelerator_type, provider, host")
    key, label = BREAKDOWNS[by]
    conv = _Converter(currency=currency, on=end - timedelta(days=1))
    qs = _daily(scope=scope, start=start, end=end, filters=filters)
    fields = ["day", key] + ([label] if label != key else [])
    groups = qs.values(*fields, "currency").annotate(total=Sum("total_cost"), idle=Sum("idle_cost"))
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    index = {d: i for i, d in enumerate(days)}
    series: dict[Any, dict[str, Any]] = {}
    unconverted = 0
    for g in groups:
        s = series.setdefault(
            g[key],
            {"key": g[key], "label": g[label] or "(none)", "values": [Decimal(0)] * len(days)},
        )
        value = conv.convert(g["total"], g["currency"] or currency)
        if value is None and g["total"] is not None:
            unconverted += 1
        s["values"][index[g["day"]]] += value or Decimal(0)
    ordered = sorted(series.values(), key=lambda s: sum(s["values"]), reverse=True)
    return {"days": days, "series": ordered, "currency": currency, "unconverted_groups": unconverted}


def price_book_rows(
    *, accelerator_price_ids: set[int] | None = None, electricity_price_ids: set[int] | None = None
) -> dict[str, list]:
    """Price-book rows (all, or the given ids) with their staleness, for citing and the admin."""
    acc = AcceleratorPrice.objects.select_related("accelerator_type")
    elec = ElectricityPrice.objects.select_related("site")
    if accelerator_price_ids is not None:
        acc = acc.filter(pk__in=accelerator_price_ids)
    if electricity_price_ids is not None:
        elec = elec.filter(pk__in=electricity_price_ids)
    return {"accelerator": list(acc), "electricity": list(elec)}


def run_cost_summary(*, scope: Scope, run: Any) -> dict[str, Any] | None:
    """What a run's page says it cost: capacity, energy and total per 1M units of work, and the
    price rows they used (the instance's price per hour, its GPUs, provider and pricing model,
    source and fetch date; the electricity price and PUE). None without a cost, or for a caller
    who may not see the run's team's costs. One query."""
    if not scope.can(Action.VIEW_COSTS, run.team_id):
        return None
    cost = run_costs_for(run_ids=[run.pk]).get(run.pk)
    if cost is None:
        return None
    price, power = cost.accelerator_price, cost.electricity_price
    return {
        "unit": cost.unit or "unit",
        "currency": cost.currency,
        "capacity_per_1m": cost.capacity_cost_per_1m,
        "energy_per_1m": cost.energy_cost_per_1m,
        "total_per_1m": cost.total_cost_per_1m,
        "energy_per_unit_j": cost.energy_per_unit_j,
        "energy_source": cost.get_energy_source_display() if cost.energy_source else "",
        "carbon_g_per_1m": cost.carbon_g_per_1m,
        "stale": cost.price_stale,
        "flags": cost.flags,
        # A training run's figures to train (``formulas.training.training_cost``); {} otherwise.
        "training": _training_view(cost.training),
        "price": None
        if price is None
        else {
            "per_hour": price.price_per_hour,
            "per_gpu_hour": price.price_per_accelerator_hour,
            "gpus": price.accelerator_count,
            "currency": price.currency,
            "basis": price_basis(price),
            "source": price.source,
            "fetched_on": price.fetched_on,
        },
        "power": None
        if power is None
        else {"per_kwh": power.price_per_kwh, "pue": power.pue, "source": power.source},
    }


def _training_view(training: dict[str, Any] | None) -> dict[str, Any]:
    """The stored figures to train, with the time also in minutes (MLPerf's unit)."""
    if not training or not training.get("time_to_train_s"):
        return dict(training or {})
    return {**training, "time_to_train_min": training["time_to_train_s"] / 60}


def price_basis(price: AcceleratorPrice) -> str:
    """A price row in a few words: ``on-prem (amortised)``, ``aws p5.48xlarge on-demand``."""
    model = price.get_pricing_model_display().lower()
    parts = [] if model.startswith(price.provider) else [price.provider]
    if price.instance_type:
        parts.append(price.instance_type)
    parts.append(model)
    return " ".join(parts)


def run_costs_for(*, run_ids: Sequence[int]) -> dict[int, RunCost]:
    """run id -> its RunCost (runs without one are absent). One query."""
    return {
        rc.run_id: rc
        for rc in RunCost.objects.filter(run_id__in=list(run_ids)).select_related(
            "accelerator_price", "electricity_price"
        )
    }


def run_cost_gaps(*, run_ids: Sequence[int]) -> dict[int, CostGap]:
    """run id -> why it has no cost per 1M (``gaps.cost_gap``: the first input it lacks and the
    fix), for the runs among ``run_ids`` without one. One query, and the price book's four when
    a run has no stored cost to say whether its price exists."""
    runs = list(
        BenchmarkRun.objects.filter(pk__in=list(run_ids))
        .filter(Q(cost__isnull=True) | Q(cost__total_cost_per_1m__isnull=True))
        .select_related("host", "accelerator_type", "cost")
    )
    book = None
    gaps: dict[int, CostGap] = {}
    for run in runs:
        host, kind = run.host, run.accelerator_type
        hostname, accelerator = (host.hostname if host else None), (kind.name if kind else None)
        provider, region = (host.provider, host.region) if host else ("", "")
        stored = getattr(run, "cost", None)
        if stored is not None:
            gap = cost_gap_from_flags(
                stored.flags or [],
                host=hostname,
                accelerator=accelerator,
                provider=provider,
                region=region,
                currency=stored.currency,
            )
        else:
            # No stored cost: the run reported no throughput; say first what else it lacks.
            found = False
            if host is not None and kind is not None:
                book = book or price_book_load(today=run.started_at.date())
                day = run.started_at.date()
                found = book.accelerator_price(host=host, accelerator_type_id=kind.pk, day=day) is not None
            gap = cost_gap(
                host=hostname,
                accelerator=accelerator,
                provider=provider,
                region=region,
                price_found=found,
                throughput=False,
            )
        if gap is not None:
            gaps[run.pk] = gap
    return gaps


def serving_costs_for(
    *,
    scope: Scope,
    start: date,
    end: date,
    variant_ids: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Per model variant and day: tokens, cost, cost per 1M tokens and J per token (serving)."""
    qs = ServingCostDaily.objects.visible_to(scope, Action.VIEW_COSTS).filter(day__gte=start, day__lt=end)
    if variant_ids is not None:
        qs = qs.filter(variant_id__in=list(variant_ids))
    items: list[dict[str, Any]] = list(
        dict(row)
        for row in qs.values("day", "variant_id", "currency")
        .annotate(
            model=F("variant__model__name"),
            variant=F("variant__name"),
            generated_tokens=Sum("generated_tokens"),
            requests=Sum("requests"),
            cost=Sum("cost"),
            capacity_cost=Sum("capacity_cost"),
            energy_kwh=Sum("energy_kwh"),
            gpu_hours=Sum("gpu_hours"),
        )
        .order_by("day", "model", "variant")
    )
    for item in items:
        tokens = item["generated_tokens"] or 0
        item["cost_per_1m_tokens"] = (
            (item["cost"] / tokens * 1_000_000).quantize(Decimal("0.000001"))
            if tokens and item["cost"]
            else None
        )
        item["energy_per_token_j"] = (
            item["energy_kwh"] * 3_600_000 / tokens if tokens and item["energy_kwh"] else None
        )
    return items


def serving_price_bases(*, scope: Scope, start: date, end: date, variant_ids: Sequence[int]) -> list[str]:
    """The price rows the serving costs of these variants in [start, end) were priced with, in
    words (``price_basis``), most used first. One query."""
    ids = (
        ServingCostDaily.objects.visible_to(scope, Action.VIEW_COSTS)
        .filter(
            day__gte=start, day__lt=end, variant_id__in=list(variant_ids), accelerator_price__isnull=False
        )
        .values("accelerator_price_id")
        .annotate(n=Count("id"))
        .order_by("-n", "accelerator_price_id")
    )
    used = [row["accelerator_price_id"] for row in ids]
    prices = AcceleratorPrice.objects.in_bulk(used)
    return list(dict.fromkeys(price_basis(prices[i]) for i in used if i in prices))


def serving_cost_gap(*, scope: Scope, start: date, end: date, variant_ids: Sequence[int]) -> CostGap | None:
    """Why the serving of these variants in [start, end) has no cost (``gaps.cost_gap``): no
    serving cost computed, or the latest unpriced row's first missing input. Two queries."""
    qs = ServingCostDaily.objects.visible_to(scope, Action.VIEW_COSTS).filter(
        day__gte=start, day__lt=end, variant_id__in=list(variant_ids)
    )
    subject = "the model's serving in the window"
    row = qs.filter(cost__isnull=True).select_related("host").order_by("-day").first()
    if row is None:
        if qs.exists():
            return None
        return cost_gap(subject=subject, computed=False, host=None, accelerator=None, price_found=False)
    host = row.host
    kind = (
        host.accelerators.exclude(accelerator_type=None)
        .values_list("accelerator_type__name", flat=True)
        .order_by("accelerator_type__name")
        .first()
    )
    return cost_gap_from_flags(
        row.flags or [],
        subject=subject,
        host=host.hostname,
        accelerator=kind,
        provider=host.provider,
        region=host.region,
        currency=row.currency,
    )


def cost_days_totals(*, scope: Scope, start: date, end: date, currency: str = "USD") -> dict[str, Any]:
    """Totals per day of [start, end) in one currency, for pages that sum their own periods (the
    overview's week and month so far and the periods before them): ``days`` maps a day to
    the sums ``cost_month_summary`` makes; ``unconverted`` lists what had no exchange rate.
    One grouped query and the rates."""
    conv = _Converter(currency=currency, on=end - timedelta(days=1))
    groups = _group(_daily(scope=scope, start=start, end=end), "day")
    days, unconverted = _fold(groups, "day", conv)
    return {"days": days, "currency": currency, "unconverted": unconverted}
