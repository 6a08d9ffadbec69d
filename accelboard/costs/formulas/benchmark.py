"""Per-unit cost and carbon of a benchmark run: what ``RunCost`` stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from .money import as_decimal
from .types import (
    J_PER_KWH,
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
)


@dataclass(frozen=True)
class BenchmarkCost:
    """Per-1M-unit capacity, energy cost and carbon of one benchmark run, as far as its prices
    go: a figure whose price is missing is None and a flag says why (never guessed).

    ``flags``: "no-accelerator-price" (no capacity, no total), "no-electricity-row" (energy
    known, no electricity or carbon row), "no-exchange-rate" (energy priced in another currency
    than capacity: no energy cost, no total)."""

    energy_per_unit_j: float | None
    capacity_per_1m: Decimal | None
    energy_cost_per_1m: Decimal | None
    total_per_1m: Decimal | None
    carbon_g_per_1m: float | None
    currency: str
    flags: tuple[str, ...] = field(default=())


def benchmark_cost(
    *,
    throughput: float,
    accelerator_count: int,
    energy_per_unit_j: float | None,
    rate: AcceleratorRate | None,
    electricity: ElectricityRate | None,
) -> BenchmarkCost:
    """Per-1M-unit cost of a run doing ``throughput`` units (tokens, samples or inferences) per
    second on ``accelerator_count`` accelerators at ``energy_per_unit_j`` J per unit.

    1. Capacity: 1M units take 1e6 / throughput seconds of every accelerator: × count × price
       per accelerator-hour / 3600.
    2. Energy: J per unit × 1e6 / 3.6e6 = kWh at the device; × PUE = facility kWh; × price per
       kWh for money (only in the capacity's currency), × the grid's g/kWh for carbon.
    3. Total = capacity + energy cost (capacity alone where energy is unknown).
    Money stays unrounded ``Decimal`` (rule 3 of :mod:`.money`: rounded where it is stored).
    """
    if throughput <= 0 or accelerator_count < 1:
        raise CostInputError("throughput, accelerator_count: must be positive")
    flags: list[str] = []
    capacity: Decimal | None = None
    currency = ""
    if rate is None:
        flags.append("no-accelerator-price")
    else:
        seconds_per_1m = as_decimal(1e6 / throughput)
        capacity = seconds_per_1m * accelerator_count * rate.price_per_accelerator_hour / 3600
        currency = rate.currency
    energy: Decimal | None = None
    carbon = None
    if energy_per_unit_j is not None and electricity is not None:
        facility_kwh = energy_per_unit_j * 1e6 / J_PER_KWH * electricity.pue
        carbon = facility_kwh * electricity.carbon_g_per_kwh
        if electricity.currency and (not currency or electricity.currency == currency):
            energy = as_decimal(facility_kwh) * electricity.price_per_kwh
            currency = currency or electricity.currency
        elif electricity.currency:
            flags.append("no-exchange-rate")
    elif energy_per_unit_j is not None:
        flags.append("no-electricity-row")
    total = None
    if capacity is not None:
        total = capacity + (energy or Decimal(0)) if "no-exchange-rate" not in flags else None
    return BenchmarkCost(
        energy_per_unit_j=energy_per_unit_j,
        capacity_per_1m=capacity,
        energy_cost_per_1m=energy,
        total_per_1m=total,
        carbon_g_per_1m=carbon,
        currency=currency,
        flags=tuple(flags),
    )
