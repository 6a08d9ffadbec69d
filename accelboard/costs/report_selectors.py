"""Reads behind the finance pages: the monthly report and its drill-down.

The report costs a fixed handful of queries whatever the fleet size: one aggregate over
``CostDaily`` for the month and the month before (grouped by day, team, project, accelerator
type, provider and currency, so ~hosts × days rows at most), one over ``ServingCostDaily`` for
spend by model, one for exchange rates. Every breakdown, the daily series, the month-over-month
change and the forecast are then pure functions of those rows (``report_build``).

Money is summed per currency and converted into the report currency only with an
``ExchangeRate`` row valid on the day; amounts with no rate are left out of the totals and
listed as unconverted, never guessed.

Who sees what: finance members and staff see every team's costs; anyone else the teams they are
a member of (``cost_team_ids_visible``).
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from accelboard.core.models import Team
from accelboard.core.selectors import team_ids_visible, user_is_finance
from accelboard.fleet.models import AcceleratorType

from .models import CostDaily, ExchangeRate, ServingCostDaily

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
MONEY_FIELDS = ("capacity_cost", "energy_cost", "idle_cost", "total_cost")
DIMENSIONS = {
    "team": "Team",
    "project": "Project",
    "accelerator_type": "Accelerator type",
    "provider": "Provider",
}


# --- scope and filters -------------------------------------------------------------------------


def cost_team_ids_visible(*, user: Any) -> list[int] | None:
    """None: every team (staff, finance). Otherwise the ids of the user's own teams."""
    if user.is_staff or user_is_finance(user=user):
        return None
    return team_ids_visible(user=user)


def cost_filter_choices(*, team_ids: list[int] | None) -> dict[str, list[tuple[str, str]]]:
    teams = Team.objects.order_by("name")
    if team_ids is not None:
        teams = teams.filter(id__in=team_ids)
    types = AcceleratorType.objects.order_by("name")
    return {
        "teams": [(team.slug, team.name) for team in teams],
        "accelerator_types": [(kind.slug, kind.name) for kind in types],
    }


@dataclass(frozen=True)
class CostFilters:
    month: dt.date
    team_id: int | None = None
    provider: str = ""
    accelerator_type_id: int | None = None
    project: str | None = None
    host_id: int | None = None
    day: dt.date | None = None
    # A served model's name: the drill-down then lists the serving rows behind its total.
    model: str | None = None


def month_bounds(month: dt.date) -> tuple[dt.date, dt.date]:
    """First day of the month and first day of the next."""
    first = month.replace(day=1)
    days = calendar.monthrange(first.year, first.month)[1]
    return first, first + dt.timedelta(days=days)


def month_previous(month: dt.date) -> dt.date:
    return (month.replace(day=1) - dt.timedelta(days=1)).replace(day=1)


def cost_daily_scoped(
    qs: QuerySet[Any], *, team_ids: list[int] | None, filters: CostFilters
) -> QuerySet[Any]:
    """``CostDaily`` rows of the teams in scope (None: all) narrowed by the filters (not the month)."""
    if team_ids is not None:
        qs = qs.filter(team_id__in=team_ids)
    if filters.team_id is not None:
        qs = qs.filter(team_id=filters.team_id)
    if filters.provider:
        qs = qs.filter(provider=filters.provider)
    if filters.accelerator_type_id is not None:
        qs = qs.filter(accelerator_type_id=filters.accelerator_type_id)
    if filters.project is not None:
        qs = qs.filter(project=filters.project)
    if filters.host_id is not None:
        qs = qs.filter(host_id=filters.host_id)
    if filters.day is not None:
        qs = qs.filter(day=filters.day)
    return qs


# --- currency ----------------------------------------------------------------------------------


class Rates:
    """Exchange rates into one currency, looked up by day (valid_from ≤ day < valid_to, the
    price book's validity end being exclusive)."""

    def __init__(self, *, currency: str, rows: list[ExchangeRate]) -> None:
        self.currency = currency
        self._by_from: dict[str, list[ExchangeRate]] = defaultdict(list)
        for row in rows:
            self._by_from[row.from_currency].append(row)
        for rates in self._by_from.values():
            rates.sort(key=lambda rate: rate.valid_from, reverse=True)

    def factor(self, *, currency: str, day: dt.date) -> float | None:
        if currency == self.currency:
            return 1.0
        for rate in self._by_from.get(currency, []):
            if rate.valid_from <= day and (rate.valid_to is None or day < rate.valid_to):
                return float(rate.rate)
        return None


def rates_load(*, currency: str) -> Rates:
    return Rates(currency=currency, rows=list(ExchangeRate.objects.filter(to_currency=currency)))


# --- the report --------------------------------------------------------------------------------


def _num(value: Any) -> float:
    return float(value) if value is not None else 0.0


@dataclass
class Group:
    """Sums of one slice (a team, a project, a day, the whole month) in the report currency."""

    key: str
    label: str
    alloc_hours: float = 0.0
    busy_hours: float = 0.0
    idle_hours: float = 0.0
    energy_kwh: float = 0.0
    energy_kwh_pue: float = 0.0
    carbon_kg: float = 0.0
    capacity_cost: float = 0.0
    energy_cost: float = 0.0
    idle_cost: float = 0.0
    total_cost: float = 0.0
    rows: int = 0
    stale_rows: int = 0
    unpriced_rows: int = 0
    previous_total: float | None = None
    # False when the previous month has fewer days of data than this one (a fleet that started
    # in it): a change against it would read as growth that is not there.
    comparable: bool = True
    drill: dict[str, str] = field(default_factory=dict)
    # Figures at least one row had a value for; the others are unknown (no price, no energy
    # measured) and a table shows them as a gap rather than as 0.
    known: set[str] = field(default_factory=set)

    def add(self, row: dict[str, Any], factor: float) -> None:
        for name in ("alloc_hours", "busy_hours", "idle_hours", "energy_kwh", "energy_kwh_pue", "carbon_kg"):
            setattr(self, name, getattr(self, name) + _num(row[name]))
            if row[name] is not None:
                self.known.add(name)
        for name in MONEY_FIELDS:
            setattr(self, name, getattr(self, name) + _num(row[name]) * factor)
            if row[name] is not None:
                self.known.add(name)
        self.rows += row["rows"]
        self.stale_rows += row["stale_rows"]
        self.unpriced_rows += row["unpriced_rows"]

    def value(self, name: str) -> Any:
        """A figure, or None where no row behind it had one."""
        if name in SUM_FIELDS and name not in self.known:
            return None
        return getattr(self, name)

    @property
    def change_pct(self) -> float | None:
        if not self.comparable or self.previous_total is None or self.previous_total == 0:
            return None
        return (self.total_cost - self.previous_total) / self.previous_total * 100.0


@dataclass
class Report:
    month: dt.date
    currency: str
    total: Group
    previous: Group
    breakdowns: dict[str, list[Group]]
    by_model: list[Group]
    daily: list[dict[str, Any]]
    days: list[dt.date]
    forecast: dict[str, Any] | None
    unconverted: dict[str, float]
    treemap: list[dict[str, Any]]
    # Days with costs in this month (so far) and in the previous one.
    days_with_data: int = 0
    previous_days_with_data: int = 0

    @property
    def comparable(self) -> bool:
        return self.previous_days_with_data >= self.days_with_data

    @property
    def change_pct(self) -> float | None:
        if not self.comparable or self.previous.rows == 0 or self.previous.total_cost == 0:
            return None
        return (self.total.total_cost - self.previous.total_cost) / self.previous.total_cost * 100.0

    @property
    def empty(self) -> bool:
        return self.total.rows == 0


def _aggregate_rows(*, team_ids: list[int] | None, filters: CostFilters) -> list[dict[str, Any]]:
    """The month and the month before, summed per day × team × project × type × provider × currency."""
    start, end = month_bounds(filters.month)
    previous_start = month_previous(filters.month)
    qs = cost_daily_scoped(CostDaily.objects.all(), team_ids=team_ids, filters=filters).filter(
        day__gte=previous_start, day__lt=end
    )
    return list(
        qs.values(
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
        )
        .annotate(**{name: Sum(name) for name in SUM_FIELDS})
        .order_by()
    )


def _model_rows(*, team_ids: list[int] | None, filters: CostFilters) -> list[dict[str, Any]]:
    start, end = month_bounds(filters.month)
    qs = ServingCostDaily.objects.filter(day__gte=start, day__lt=end)
    if team_ids is not None:
        qs = qs.filter(team_id__in=team_ids)
    if filters.team_id is not None:
        qs = qs.filter(team_id=filters.team_id)
    if filters.provider:
        qs = qs.filter(host__provider=filters.provider)
    return list(
        qs.values("day", "variant__model__name", "currency")
        .annotate(
            rows=Count("id"),
            stale_rows=Count("id", filter=Q(price_stale=True)),
            unpriced_rows=Count("id", filter=Q(cost__isnull=True)),
        )
        .annotate(
            total_cost=Sum("cost"),
            capacity_cost=Sum("capacity_cost"),
            energy_cost=Sum("energy_cost"),
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


def report_build(
    *,
    month: dt.date,
    rows: list[dict[str, Any]],
    model_rows: list[dict[str, Any]],
    rates: Rates,
    today: dt.date,
) -> Report:
    """Totals, breakdowns, daily series, month-over-month and forecast from aggregate rows. Pure."""
    start, end = month_bounds(month)
    total, previous = Group("total", "Total"), Group("previous", "Previous month")
    groups: dict[str, dict[str, Group]] = {name: {} for name in DIMENSIONS}
    daily: dict[tuple[dt.date, str, str], float] = defaultdict(float)
    treemap: dict[tuple[str, str], float] = defaultdict(float)
    unconverted: dict[str, float] = defaultdict(float)
    for row in rows:
        factor = rates.factor(currency=row["currency"] or rates.currency, day=row["day"])
        if factor is None:
            if row["day"] >= start:
                unconverted[row["currency"]] += _num(row["total_cost"])
            continue
        current = row["day"] >= start
        for dimension in DIMENSIONS:
            key, label, drill = _drill_keys(dimension, row)
            group = groups[dimension].setdefault(key, Group(key, label, drill=drill))
            if current:
                group.add(row, factor)
            else:
                group.previous_total = (group.previous_total or 0.0) + _num(row["total_cost"]) * factor
        if not current:
            previous.add(row, factor)
            continue
        total.add(row, factor)
        spend = _num(row["total_cost"]) * factor
        daily[(row["day"], "team", row["team__name"] or "No team")] += spend
        daily[(row["day"], "provider", row["provider"] or "unknown")] += spend
        treemap[(row["team__name"] or "No team", row["accelerator_type__name"] or "Unknown type")] += spend

    by_model: dict[str, Group] = {}
    for row in model_rows:
        factor = rates.factor(currency=row["currency"] or rates.currency, day=row["day"])
        name = row["variant__model__name"] or "unknown model"
        if factor is None:
            unconverted[row["currency"]] += _num(row["total_cost"])
            continue
        group = by_model.setdefault(name, Group(name, name))
        row = {**row, "busy_hours": None, "idle_hours": None, "idle_cost": None}
        group.add(row, factor)

    days_with_data = len({row["day"] for row in rows if row["day"] >= start})
    previous_days_with_data = len({row["day"] for row in rows if row["day"] < start})
    for found in groups.values():
        for group in found.values():
            group.comparable = previous_days_with_data >= days_with_data
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
        previous=previous,
        breakdowns=breakdowns,
        by_model=_models_with_rest(by_model, total),
        daily=[
            {"day": day, "by": by, "group": group, "spend": spend}
            for (day, by, group), spend in sorted(daily.items())
        ],
        days=[start + dt.timedelta(days=i) for i in range((end - start).days)],
        forecast=forecast_month(month=start, daily_spend=_daily_totals(daily), today=today),
        unconverted=dict(unconverted),
        treemap=[
            {"team": team, "accelerator_type": kind, "spend": spend}
            for (team, kind), spend in treemap.items()
        ],
        days_with_data=days_with_data,
        previous_days_with_data=previous_days_with_data,
    )


def _models_with_rest(by_model: dict[str, Group], total: Group) -> list[Group]:
    """Serving spend per model, biggest first, then what no model's serving accounts for
    (training, benchmarks, idle hosts): the column adds up to the month's spend."""
    models = sorted(by_model.values(), key=lambda group: (-group.total_cost, group.label))
    if not models:
        return []
    rest = Group("-", "Not attributed to a model")
    rest.total_cost = max(total.total_cost - sum(group.total_cost for group in models), 0.0)
    rest.capacity_cost = max(total.capacity_cost - sum(group.capacity_cost for group in models), 0.0)
    rest.energy_cost = max(total.energy_cost - sum(group.energy_cost for group in models), 0.0)
    rest.alloc_hours = max(total.alloc_hours - sum(group.alloc_hours for group in models), 0.0)
    rest.energy_kwh = max(total.energy_kwh - sum(group.energy_kwh for group in models), 0.0)
    rest.energy_kwh_pue = max(total.energy_kwh_pue - sum(group.energy_kwh_pue for group in models), 0.0)
    rest.carbon_kg = max(total.carbon_kg - sum(group.carbon_kg for group in models), 0.0)
    rest.known = {name for name in SUM_FIELDS if name in total.known} - {
        "busy_hours",
        "idle_hours",
        "idle_cost",
    }
    # Where serving accounts for every cent there is nothing to attribute: no empty line.
    return [*models, rest] if rest.total_cost >= 0.005 else models


def _daily_totals(daily: dict[tuple[dt.date, str, str], float]) -> dict[dt.date, float]:
    totals: dict[dt.date, float] = defaultdict(float)
    for (day, by, _group), spend in daily.items():
        if by == "team":
            totals[day] += spend
    return totals


RUN_RATE_DAYS = 7


def forecast_month(
    *, month: dt.date, daily_spend: dict[dt.date, float], today: dt.date
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
    *, team_ids: list[int] | None, filters: CostFilters, today: dt.date, currency: str = REPORT_CURRENCY
) -> Report:
    """The monthly report for the teams in scope (None: all) and the filters. Three queries.

    Serving costs know their host, team and model but not the accelerator type or project a
    host-day was booked to: under those filters the model breakdown is left out, not guessed.
    """
    models = filters.accelerator_type_id is None and filters.project is None
    return report_build(
        month=filters.month,
        rows=_aggregate_rows(team_ids=team_ids, filters=filters),
        model_rows=_model_rows(team_ids=team_ids, filters=filters) if models else [],
        rates=rates_load(currency=currency),
        today=today,
    )
