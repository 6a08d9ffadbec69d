"""Reads of a training job's progress for its page: step time, cost and energy per step over
the job's life from its attributed GPU-time (``training.intervals_build``), the projection to its
planned steps, and its step-time alerts. Four queries and the price book's."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from accelboard.alerts.choices import AlertKind
from accelboard.alerts.models import Alert
from accelboard.core.access import Action, Scope
from accelboard.costs.formulas.money import money_convert
from accelboard.costs.formulas.types import J_PER_KWH, MissingRateError, Money
from accelboard.costs.pricebook_selectors import PriceBook, accelerator_rate_value, price_book_load
from accelboard.fleet.models import GpuAttribution, TelemetryRollup, Workload

from . import training
from .models import TrainingProgress


def training_points(*, workload: Workload) -> list[training.Point]:
    """The job's progress points, oldest first. One query."""
    return [
        training.Point(at=p.at, step=p.step, samples=p.samples, tokens=p.tokens, loss=p.loss)
        for p in TrainingProgress.objects.filter(workload=workload).order_by("at")
    ]


@dataclass
class TrainingSummary:
    points: list[training.Point]
    intervals: list[training.Interval]
    planned_steps: int | None
    currency: str
    sees_costs: bool
    projection: training.Projection | None
    alerts: list[Alert] = field(default_factory=list)
    unpriced_gpus: int = 0

    @property
    def first_at(self) -> datetime:
        return self.points[0].at

    @property
    def last_at(self) -> datetime:
        return self.points[-1].at

    @property
    def steps(self) -> int:
        return self.points[-1].step if self.points else 0

    @property
    def cost(self) -> float | None:
        """Capacity + energy cost over the reports (None where an interval has no price)."""
        costs = [i.cost for i in self.intervals]
        return None if not costs or any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def capacity_cost(self) -> float | None:
        costs = [i.capacity_cost for i in self.intervals]
        return None if not costs or any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def energy_cost(self) -> float | None:
        """The energy part of ``cost``; None where no interval's energy was priced."""
        costs = [i.energy_cost for i in self.intervals if i.energy_cost is not None]
        return sum(costs) if costs and self.cost is not None else None

    @property
    def capacity_cost_per_step(self) -> float | None:
        cost = self.capacity_cost
        return None if cost is None or not self.reported_steps else cost / self.reported_steps

    @property
    def energy_cost_per_step(self) -> float | None:
        cost = self.energy_cost
        return None if cost is None or not self.reported_steps else cost / self.reported_steps

    @property
    def energy_j(self) -> float | None:
        energies = [i.energy_j for i in self.intervals if i.energy_j is not None]
        return sum(energies) if energies else None

    @property
    def reported_steps(self) -> int:
        return sum(i.steps for i in self.intervals)

    @property
    def cost_per_step(self) -> float | None:
        cost = self.cost
        return None if cost is None or not self.reported_steps else cost / self.reported_steps

    @property
    def energy_per_step_j(self) -> float | None:
        energy = self.energy_j
        return None if energy is None or not self.reported_steps else energy / self.reported_steps

    @property
    def step_time_s(self) -> float | None:
        if not self.reported_steps:
            return None
        return (self.points[-1].at - self.points[0].at).total_seconds() / self.reported_steps


def _energy_price_per_j(book: PriceBook, accelerator: Any, day: Any, currency: str) -> float | None:
    """The host's site energy price per joule at the device on ``day`` (PUE × price per kWh, as
    the daily cost pass prices a host-day's energy), in ``currency``; None without an electricity
    row or an exchange rate to ``currency``."""
    row = book.electricity_price(host=accelerator.host, day=day)
    if row is None or not row.currency:
        return None
    per_kwh = Money(amount=row.price_per_kwh * Decimal(str(row.pue)), currency=row.currency)
    try:
        amount = money_convert(money=per_kwh, to_currency=currency, rates=book.exchange_rates(day=day)).amount
    except MissingRateError:
        return None
    return float(amount) / J_PER_KWH


def _holds(workload: Workload, since: datetime, until: datetime) -> tuple[list[training.Hold], str, int]:
    """The job's holds over [since, until) with each GPU's price per second and its site's energy
    price per joule; (holds, currency, GPUs without a price in that currency)."""
    rows = list(
        GpuAttribution.objects.filter(workload_id=workload.pk, start__lt=until, end__gt=since).select_related(
            "accelerator__host", "accelerator__accelerator_type"
        )
    )
    book = price_book_load(today=until.date())
    prices: dict[tuple[int, int], Any] = {}
    energy_prices: dict[tuple[int, int], float | None] = {}
    currency = ""
    unpriced: set[int] = set()
    holds = []
    for row in rows:
        accelerator = row.accelerator
        key = (accelerator.pk, row.start.date().toordinal())
        if key not in prices:
            price = book.accelerator_price(
                host=accelerator.host,
                accelerator_type_id=accelerator.accelerator_type_id,
                day=row.start.date(),
            )
            prices[key] = accelerator_rate_value(price, today=book.today) if price is not None else None
        rate = prices[key]
        per_s = per_j = None
        if rate is not None and (not currency or rate.currency == currency):
            currency = rate.currency
            per_s = float(rate.price_per_accelerator_hour) / 3600.0
            if key not in energy_prices:
                energy_prices[key] = _energy_price_per_j(book, accelerator, row.start.date(), currency)
            per_j = energy_prices[key]
        else:
            unpriced.add(accelerator.pk)
        holds.append(
            training.Hold(
                accelerator_id=accelerator.pk,
                start=row.start,
                end=row.end,
                share=row.share,
                price_per_s=per_s,
                energy_price_per_j=per_j,
            )
        )
    return holds, currency, len(unpriced)


def _energy(holds: list[training.Hold], since: datetime, until: datetime) -> dict[int, dict[datetime, float]]:
    out: dict[int, dict[datetime, float]] = {}
    rows = TelemetryRollup.objects.filter(
        width_s=60,
        accelerator_id__in={h.accelerator_id for h in holds},
        bucket__gte=since - timedelta(minutes=1),
        bucket__lt=until,
        energy_j__isnull=False,
    ).values_list("accelerator_id", "bucket", "energy_j")
    for accelerator_id, bucket, joules in rows:
        if joules is not None:
            out.setdefault(accelerator_id, {})[bucket] = float(joules)
    return out


def training_alerts(*, workload: Workload) -> QuerySet[Alert]:
    return Alert.objects.filter(kind=AlertKind.TRAINING, detail__workload_id=workload.pk).order_by(
        "-opened_at"
    )


def training_summary(*, scope: Scope, workload: Workload) -> TrainingSummary | None:
    """The job's training figures (module docstring); None when it never reported progress."""
    points = training_points(workload=workload)
    if not points:
        return None
    since, until = points[0].at, points[-1].at
    holds, currency, unpriced = _holds(workload, since, until)
    intervals = training.intervals_build(points=points, holds=holds, energy=_energy(holds, since, until))
    sees_costs = scope.can(Action.VIEW_COSTS, workload.team_id)
    planned = (
        TrainingProgress.objects.filter(workload=workload, planned_steps__isnull=False)
        .order_by("-at")
        .values_list("planned_steps", flat=True)
        .first()
    )
    return TrainingSummary(
        points=points,
        intervals=intervals,
        planned_steps=planned,
        currency=currency,
        sees_costs=sees_costs,
        projection=training.projection(intervals=intervals, planned_steps=planned, steps_done=points[-1].step)
        if sees_costs
        else None,
        alerts=list(training_alerts(workload=workload)),
        unpriced_gpus=unpriced,
    )
