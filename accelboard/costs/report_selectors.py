"""Reads behind the finance pages: the monthly report and its drill-down.

The report costs a fixed handful of queries whatever the fleet size: one aggregate over
``CostDaily`` for the month and the month before (grouped by day, team, project, accelerator
type, provider and currency, so ~hosts × days rows at most), one over ``ServingCostDaily`` for
spend by model, one for exchange rates. Every breakdown, the daily series, the month-over-month
change and the forecast are then pure functions of those rows (``report_build``).

Money is summed per currency and converted into the report currency only with an
``ExchangeRate`` row valid on the day; amounts with no rate are left out of the totals and
listed as unconverted, never guessed.

Who sees what is the caller's ``Scope`` under ``Action.VIEW_COSTS`` (``accelboard.core.access``):
finance members and staff see every team's costs; anyone else the teams they are a member of.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from accelboard.core.access import Action, Scope
from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType, Host

from .filters import CostDailyFilterSet, CostFilters, ServingCostFilterSet, cost_rows_narrowed
from .models import CostDaily, ExchangeRate, ServingCostDaily
from .periods import Comparison, month_comparison

REPORT_CURRENCY = "USD"
SUM_FIELDS = (
    "alloc_hours",
    "busy_hours",
    "idle_hours",
    "energy_kwh",
    "energy_kwh_pue",
    "carbon_kg",
    "capacity_cost",
    "energy_cost",
    "idle_cost",
    "total_cost",
)
MONEY_FIELDS = ("capacity_cost", "energy_cost", "idle_cost", "total_cost", "stale_cost")
# The parts of spend are counted where the spend is: a host-day with no spend (no accelerator
# price, or no exchange rate for its energy) adds its hours but none of its money, so that in
# every row and every total Spend = Capacity + Energy cost to the cent.
_PRICED = Q(total_cost__isnull=False)
DIMENSIONS = {
    "team": "Team",
    "project": "Project",
    "accelerator_type": "Accelerator type",
    "provider": "Provider",
}


# --- scope and filters -------------------------------------------------------------------------


def cost_filter_choices(*, scope: Scope) -> dict[str, list[tuple[str, str]]]:
    teams = Team.objects.visible_to(scope, Action.VIEW_COSTS).order_by("name")
    types = AcceleratorType.objects.order_by("name")
    return {
        "teams": [(team.slug, team.name) for team in teams],
        "accelerator_types": [(kind.slug, kind.name) for kind in types],
    }


def month_bounds(month: dt.date) -> tuple[dt.date, dt.date]:
    """First day of the month and first day of the next."""
    first = month.replace(day=1)
    days = calendar.monthrange(first.year, first.month)[1]
    return first, first + dt.timedelta(days=days)


def month_previous(month: dt.date) -> dt.date:
    return (month.replace(day=1) - dt.timedelta(days=1)).replace(day=1)


class CostFilterNotVisible(LookupError):
    """A team or host named in the filters that the caller may not see (a 404 for the page)."""


def cost_filters_resolve(*, scope: Scope, data: dict[str, Any], today: dt.date) -> CostFilters:
    """The finance pages' cleaned form values (slugs and names) as ids, within the caller's scope."""
    team_id = None
    if data.get("team"):
        team_id = (
            Team.objects.visible_to(scope, Action.VIEW_COSTS)
            .filter(slug=data["team"])
            .values_list("id", flat=True)
            .first()
        )
        if team_id is None:
            raise CostFilterNotVisible("No such team among the teams whose costs you may see")
    type_id = None
    if data.get("accelerator_type"):
        type_id = (
            AcceleratorType.objects.filter(slug=data["accelerator_type"]).values_list("id", flat=True).first()
        )
    host_id = None
    if data.get("host"):
        # Host names are unique within a team only: with the team filter the name is the team's
        # host; without it, it must be the name of one host among the caller's teams.
        hosts = Host.objects.visible_to(scope, Action.VIEW_COSTS).filter(hostname=data["host"])
        if team_id is not None:
            hosts = hosts.filter(team_id=team_id)
        found = list(hosts.values_list("id", flat=True)[:2])
        if not found:
            raise CostFilterNotVisible("No such host among the teams whose costs you may see")
        if len(found) > 1:
            raise CostFilterNotVisible(
                f"Several of your teams have a host named {data['host']!r}: choose the team as well"
            )
        host_id = found[0]
    return CostFilters(
        month=data.get("month") or today.replace(day=1),
        team_id=team_id,
        provider=data.get("provider") or "",
        accelerator_type_id=type_id,
        project=data.get("project") or None,
        host_id=host_id,
        day=data.get("day"),
        model=data.get("model") or None,
    )


def cost_month_default(*, scope: Scope, today: dt.date) -> dt.date:
    """The month the finance pages open on: the last complete one, unless the caller has no costs
    before this month (then this month). One query."""
    this_month = today.replace(day=1)
    earlier = CostDaily.objects.visible_to(scope, Action.VIEW_COSTS).filter(day__lt=this_month).exists()
    return month_previous(this_month) if earlier else this_month


def cost_daily_scoped(*, scope: Scope, filters: CostFilters) -> QuerySet[CostDaily]:
    """``CostDaily`` rows whose costs the caller may see, narrowed by the filters (not the month)."""
    return cost_rows_narrowed(
        CostDailyFilterSet, CostDaily.objects.visible_to(scope, Action.VIEW_COSTS), filters
    )


def serving_cost_scoped(*, scope: Scope, filters: CostFilters) -> QuerySet[ServingCostDaily]:
    """``ServingCostDaily`` rows whose costs the caller may see, narrowed by the filters."""
    return cost_rows_narrowed(
        ServingCostFilterSet, ServingCostDaily.objects.visible_to(scope, Action.VIEW_COSTS), filters
    )


# --- currency ----------------------------------------------------------------------------------


class Rates:
    """Exchange rates into one currency, looked up by day (valid_from ≤ day < valid_to, the
    price book's validity end being exclusive). Factors are Decimal: money stays Decimal."""

    def __init__(self, *, currency: str, rows: list[ExchangeRate]) -> None:
        self.currency = currency
        self._by_from: dict[str, list[ExchangeRate]] = defaultdict(list)
        for row in rows:
            self._by_from[row.from_currency].append(row)
        for rates in self._by_from.values():
            rates.sort(key=lambda rate: rate.valid_from, reverse=True)

    def factor(self, *, currency: str, day: dt.date) -> Decimal | None:
        if currency == self.currency:
            return Decimal(1)
        for rate in self._by_from.get(currency, []):
            if rate.valid_from <= day and (rate.valid_to is None or day < rate.valid_to):
                return Decimal(rate.rate)
        return None


def rates_load(*, currency: str) -> Rates:
    return Rates(currency=currency, rows=list(ExchangeRate.objects.filter(to_currency=currency)))


# --- the report --------------------------------------------------------------------------------

ZERO = Decimal(0)


def _num(value: Any) -> float:
    return float(value) if value is not None else 0.0


def _money(value: Any) -> Decimal:
    return Decimal(value) if value is not None else ZERO


@dataclass
class Group:
    """Sums of one slice (a team, a project, a day, the whole month) in the report currency.

    Money is Decimal (sums of stored, already rounded amounts: exact); physical quantities float.
    ``previous_total`` and ``compared_total`` are the spend in the two windows the change
    compares (``comparison``: the same complete days of this month and the month before), and
    ``covered_*`` the days of each window with data for this slice.
    """

    key: str
    label: str
    alloc_hours: float = 0.0
    busy_hours: float = 0.0
    idle_hours: float = 0.0
    energy_kwh: float = 0.0
    energy_kwh_pue: float = 0.0
    carbon_kg: float = 0.0
    capacity_cost: Decimal = ZERO
    energy_cost: Decimal = ZERO
    idle_cost: Decimal = ZERO
    total_cost: Decimal = ZERO
    stale_cost: Decimal = ZERO
    rows: int = 0
    stale_rows: int = 0
    unpriced_rows: int = 0
    previous_total: Decimal | None = None
    compared_total: Decimal | None = None
    covered_now: set[dt.date] = field(default_factory=set)
    covered_before: set[dt.date] = field(default_factory=set)
    comparison: Comparison | None = None
    drill: dict[str, str] = field(default_factory=dict)
    # Figures at least one row had a value for; the others are unknown (no price, no energy
    # measured) and a table shows them as a gap rather than as 0.
    known: set[str] = field(default_factory=set)

    def add(self, row: dict[str, Any], factor: Decimal) -> None:
        for name in ("alloc_hours", "busy_hours", "idle_hours", "energy_kwh", "energy_kwh_pue", "carbon_kg"):
            setattr(self, name, getattr(self, name) + _num(row[name]))
            if row[name] is not None:
                self.known.add(name)
        for name in MONEY_FIELDS:
            setattr(self, name, getattr(self, name) + _money(row[name]) * factor)
            if row[name] is not None:
                self.known.add(name)
        if row["total_cost"] is not None:
            # A priced slice has a spend on a stale price, if only 0.
            self.known.add("stale_cost")
        self.rows += row["rows"]
        self.stale_rows += row["stale_rows"]
        self.unpriced_rows += row["unpriced_rows"]

    def add_compared(self, row: dict[str, Any], factor: Decimal) -> None:
        """A row of either window of the comparison (this month's or the month before's)."""
        if self.comparison is None:
            return
        spend = _money(row["total_cost"]) * factor
        if self.comparison.in_now(row["day"]):
            self.compared_total = (self.compared_total or ZERO) + spend
            self.covered_now.add(row["day"])
        elif self.comparison.in_before(row["day"]):
            self.previous_total = (self.previous_total or ZERO) + spend
            self.covered_before.add(row["day"])

    @property
    def active_hours(self) -> float:
        """GPU-hours held at 10 % utilisation or more: held = active + idle, exactly."""
        return self.alloc_hours - self.idle_hours

    def value(self, name: str) -> Any:
        """A figure, or None where no row behind it had one."""
        if name == "active_hours":
            return None if "idle_hours" not in self.known else self.active_hours
        if name in (*SUM_FIELDS, "stale_cost") and name not in self.known:
            return None
        return getattr(self, name)

    @property
    def comparable(self) -> bool:
        """Both windows of the comparison have data on every one of their days."""
        return self.comparison is not None and self.comparison.covered(
            covered_now=len(self.covered_now), covered_before=len(self.covered_before)
        )

    @property
    def change_pct(self) -> float | None:
        """The change of spend per day between the comparison's windows (None when it is not
        comparable or there is nothing before)."""
        if self.comparison is None:
            return None
        return self.comparison.change_pct(
            now=self.compared_total,
            before=self.previous_total,
            covered_now=len(self.covered_now),
            covered_before=len(self.covered_before),
        )


@dataclass
class Report:
    month: dt.date
    currency: str
    total: Group
    breakdowns: dict[str, list[Group]]
    by_model: list[Group]
    daily: dict[str, list[dict[str, Any]]]  # grouping ("team", "provider") -> rows of that grouping
    days: list[dt.date]
    forecast: dict[str, Any] | None
    unconverted: dict[str, Decimal]
    treemap: list[dict[str, Any]]
    comparison: Comparison | None = None

    @property
    def comparable(self) -> bool:
        return self.total.comparable

    @property
    def change_pct(self) -> float | None:
        return self.total.change_pct

    @property
    def empty(self) -> bool:
        return self.total.rows == 0


def _aggregate_rows(*, scope: Scope, filters: CostFilters) -> list[dict[str, Any]]:
    """The month and the month before, summed per day × team × project × type × provider × currency."""
    start, end = month_bounds(filters.month)
    previous_start = month_previous(filters.month)
    qs = cost_daily_scoped(scope=scope, filters=filters).filter(day__gte=previous_start, day__lt=end)
    return [
        dict(row)
        for row in qs.values(
            "day",
            "team_id",
            "team__name",
            "team__slug",
            "project",
            "accelerator_type__name",
            "accelerator_type__slug",
            "provider",
            "currency",
        )
        # Counts first: once annotated, "total_cost" names the sum, and a FILTER may not hold one.
        .annotate(
            rows=Count("id"),
            stale_rows=Count("id", filter=Q(price_stale=True)),
            unpriced_rows=Count("id", filter=Q(total_cost__isnull=True)),
            stale_cost=Sum("total_cost", filter=Q(price_stale=True)),
            **{
                name: Sum(name, filter=_PRICED)
                for name in MONEY_FIELDS
                if name not in ("stale_cost", "total_cost")
            },
        )
        .annotate(
            total_cost=Sum("total_cost"),
            **{name: Sum(name) for name in SUM_FIELDS if name not in MONEY_FIELDS},
        )
        .order_by()
    ]


def _model_rows(*, scope: Scope, filters: CostFilters) -> list[dict[str, Any]]:
    start, end = month_bounds(filters.month)
    qs = serving_cost_scoped(scope=scope, filters=filters).filter(day__gte=start, day__lt=end)
    return list(
        dict(row)
        for row in qs.values("day", "variant__model__name", "currency")
        .annotate(
            rows=Count("id"),
            stale_rows=Count("id", filter=Q(price_stale=True)),
            unpriced_rows=Count("id", filter=Q(cost__isnull=True)),
        )
        .annotate(
            total_cost=Sum("cost"),
            capacity_cost=Sum("capacity_cost", filter=Q(cost__isnull=False)),
            energy_cost=Sum("energy_cost", filter=Q(cost__isnull=False)),
            stale_cost=Sum("cost", filter=Q(price_stale=True)),
            energy_kwh=Sum("energy_kwh"),
            energy_kwh_pue=Sum("energy_kwh_pue"),
            carbon_kg=Sum("carbon_kg"),
            alloc_hours=Sum("gpu_hours"),
        )
        .order_by()
    )


def _drill_keys(dimension: str, row: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    if dimension == "team":
        slug = row["team__slug"] or ""
        return slug or "-", row["team__name"] or "No team", {"team": slug} if slug else {}
    if dimension == "project":
        project = row["project"] or ""
        return project or "-", project or "No project", {"project": project}
    if dimension == "accelerator_type":
        slug = row["accelerator_type__slug"] or ""
        return (
            slug or "-",
            row["accelerator_type__name"] or "Unknown type",
            ({"accelerator_type": slug} if slug else {}),
        )
    provider = row["provider"] or ""
    return provider or "-", provider or "unknown", {"provider": provider}


DAILY_GROUPINGS = ("team", "provider")


def report_build(
    *,
    month: dt.date,
    rows: list[dict[str, Any]],
    model_rows: list[dict[str, Any]],
    rates: Rates,
    today: dt.date,
) -> Report:
    """Totals, breakdowns, daily series, the change against the month before and the forecast
    from aggregate rows. Pure. Money is summed as Decimal, so every breakdown adds up to the
    total to the cent."""
    start, end = month_bounds(month)
    comparison = month_comparison(month=start, today=today)
    total = Group("total", "Total", comparison=comparison)
    groups: dict[str, dict[str, Group]] = {name: {} for name in DIMENSIONS}
    daily: dict[tuple[dt.date, str, str], Decimal] = defaultdict(Decimal)
    treemap: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unconverted: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        factor = rates.factor(currency=row["currency"] or rates.currency, day=row["day"])
        if factor is None:
            if row["day"] >= start:
                unconverted[row["currency"]] += _money(row["total_cost"])
            continue
        current = row["day"] >= start
        for dimension in DIMENSIONS:
            key, label, drill = _drill_keys(dimension, row)
            group = groups[dimension].setdefault(key, Group(key, label, drill=drill, comparison=comparison))
            if current:
                group.add(row, factor)
            group.add_compared(row, factor)
        total.add_compared(row, factor)
        if not current:
            continue
        total.add(row, factor)
        spend = _money(row["total_cost"]) * factor
        daily[(row["day"], "team", row["team__name"] or "No team")] += spend
        daily[(row["day"], "provider", row["provider"] or "unknown")] += spend
        treemap[(row["team__name"] or "No team", row["accelerator_type__name"] or "Unknown type")] += spend

    by_model: dict[str, Group] = {}
    for row in model_rows:
        factor = rates.factor(currency=row["currency"] or rates.currency, day=row["day"])
        name = row["variant__model__name"] or "unknown model"
        if factor is None:
            unconverted[row["currency"]] += _money(row["total_cost"])
            continue
        group = by_model.setdefault(name, Group(name, name))
        row = {**row, "busy_hours": None, "idle_hours": None, "idle_cost": None, "unpriced_rows": 0}
        group.add(row, factor)

    breakdowns = {
        name: sorted(
            (group for group in found.values() if group.rows),
            key=lambda group: (-group.total_cost, group.label),
        )
        for name, found in groups.items()
    }
    return Report(
        month=start,
        currency=rates.currency,
        total=total,
        breakdowns=breakdowns,
        by_model=_models_with_rest(by_model, total),
        daily={
            by: [
                {"day": day, "by": grouping, "group": group, "spend": spend}
                for (day, grouping, group), spend in sorted(daily.items())
                if grouping == by
            ]
            for by in DAILY_GROUPINGS
        },
        days=[start + dt.timedelta(days=i) for i in range((end - start).days)],
        forecast=forecast_month(month=start, daily_spend=_daily_totals(daily), today=today),
        unconverted=dict(unconverted),
        treemap=[
            {"team": team, "accelerator_type": kind, "spend": spend}
            for (team, kind), spend in treemap.items()
        ],
        comparison=comparison,
    )


def _models_with_rest(by_model: dict[str, Group], total: Group) -> list[Group]:
    """Serving spend per model, biggest first, then what no model's serving accounts for
    (training, benchmarks, idle hosts): every column adds up to the month's total, the same
    total every other breakdown adds up to (the rest is the difference, never clamped: a
    negative rest would show serving counted twice rather than hide it)."""
    models = sorted(by_model.values(), key=lambda group: (-group.total_cost, group.label))
    if not models:
        return []
    rest = Group("-", "Not attributed to a model")
    for name in ("total_cost", "capacity_cost", "energy_cost", "stale_cost"):
        setattr(rest, name, getattr(total, name) - sum((getattr(g, name) for g in models), ZERO))
    for name in ("alloc_hours", "energy_kwh", "energy_kwh_pue", "carbon_kg"):
        setattr(rest, name, getattr(total, name) - sum(getattr(g, name) for g in models))
    rest.known = {name for name in (*SUM_FIELDS, "stale_cost") if name in total.known} - {
        "busy_hours",
        "idle_hours",
        "idle_cost",
    }
    # Where serving accounts for every cent and hour there is nothing to attribute: no empty line.
    empty = abs(rest.total_cost) < Decimal("0.005") and abs(rest.alloc_hours) < 0.05
    return models if empty else [*models, rest]


def _daily_totals(daily: dict[tuple[dt.date, str, str], Decimal]) -> dict[dt.date, Decimal]:
    totals: dict[dt.date, Decimal] = defaultdict(Decimal)
    for (day, by, _group), spend in daily.items():
        if by == "team":
            totals[day] += spend
    return totals


RUN_RATE_DAYS = 7


def forecast_month(
    *, month: dt.date, daily_spend: Mapping[dt.date, Any], today: dt.date
) -> dict[str, Any] | None:
    """Spend of the whole month: the complete days so far plus the remaining days at the run
    rate (mean daily spend of the last 7 complete days, fewer early in the month).

    Only for the current month (a past month is known, a future one has no rate); None before
    the first day is complete. Today is still running, so its partial spend is left out and the
    run rate stands in for it. The run rate is recent rather than month-to-date so that a fleet
    that grew (or started) mid-month is not under-forecast. Example: 1 and 2 October at 100
    each, today 3 October -> 200 + 100 × 29 = 3,100.
    """
    start, end = month_bounds(month)
    if not start <= today < end:
        return None
    elapsed = (today - start).days
    if elapsed == 0:
        return None
    to_date = sum(spend for day, spend in daily_spend.items() if day < today)
    window = min(RUN_RATE_DAYS, elapsed)
    recent = sum(
        spend for day, spend in daily_spend.items() if today - dt.timedelta(days=window) <= day < today
    )
    rate = recent / window
    days = (end - start).days
    return {
        "to_date": to_date,
        "days_elapsed": elapsed,
        "days": days,
        "days_left": days - elapsed,
        "window_days": window,
        "run_rate": rate,
        "forecast": to_date + rate * (days - elapsed),
    }


def cost_report(
    *, scope: Scope, filters: CostFilters, today: dt.date, currency: str = REPORT_CURRENCY
) -> Report:
    """The monthly report for the teams in scope (None: all) and the filters. Three queries.

    Serving costs know their host, team and model but not the accelerator type or project a
    host-day was booked to: under those filters the model breakdown is left out, not guessed.
    """
    models = filters.accelerator_type_id is None and filters.project is None
    return report_build(
        month=filters.month,
        rows=_aggregate_rows(scope=scope, filters=filters),
        model_rows=_model_rows(scope=scope, filters=filters) if models else [],
        rates=rates_load(currency=currency),
        today=today,
    )
