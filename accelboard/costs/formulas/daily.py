"""The cost of one host's accelerators of one type over one day, from aggregated rollups. Pure.

Inputs are the day's sums over 60 s rollup buckets (one bucket = one GPU held for its width),
the accelerator rate and the electricity rate (or None where the book has no row). Figures:

1. Hours: allocation = buckets × width; usage = Σ utilisation/100 × width; idle = buckets whose
   mean utilisation is below 10 % × width (from the SQL sums, so a month is not pulled into
   Python row by row).
2. Money: capacity = allocation × price per accelerator-hour (allocation basis, idle included);
   usage cost = usage hours × the same price; idle cost = idle hours × the price.
3. Energy: kWh = J / 3.6e6; × PUE; carbon = kWh × PUE × grid g/kWh. Energy cost = kWh × PUE ×
   price per kWh where a site electricity row exists (a region's carbon row gives carbon only).
4. Total = capacity + energy cost, converted to the capacity's currency with a given exchange
   rate; without a rate the total is None and the flag says so. Nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from .money import as_decimal, money_convert
from .types import (
    IDLE_UTIL_BELOW_PCT,
    J_PER_KWH,
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    ExchangeRate,
    MissingRateError,
    Money,
)

__all__ = ["IDLE_UTIL_BELOW_PCT", "HostDayCost", "host_day_cost"]


@dataclass(frozen=True)
class HostDayCost:
    alloc_h: float
    busy_h: float
    idle_h: float
    energy_kwh: float | None
    energy_kwh_pue: float | None
    carbon_kg: float | None
    capacity: Decimal | None
    usage: Decimal | None
    idle: Decimal | None
    energy: Decimal | None
    total: Decimal | None
    currency: str
    flags: tuple[str, ...] = field(default=())


def host_day_cost(
    *,
    width_s: float,
    buckets: float,
    util_sum_pct: float,
    idle_buckets: int,
    energy_j: float | None,
    rate: AcceleratorRate | None,
    electricity: ElectricityRate | None,
    rates: Sequence[ExchangeRate] = (),
) -> HostDayCost:
    """See the module docstring. ``util_sum_pct`` is the sum of bucket mean utilisations (%)."""
    if width_s <= 0 or buckets < 0 or idle_buckets < 0 or util_sum_pct < 0:
        raise CostInputError("width_s, buckets, idle_buckets, util_sum_pct: must not be negative")
    if energy_j is not None and energy_j < 0:
        raise CostInputError("energy_j: negative energy")
    flags: list[str] = []
    alloc_h = buckets * width_s / 3600.0
    busy_h = util_sum_pct / 100.0 * width_s / 3600.0
    idle_h = idle_buckets * width_s / 3600.0

    kwh = kwh_pue = carbon_kg = None
    if energy_j is None:
        flags.append("no-energy")
    else:
        kwh = energy_j / J_PER_KWH
        if electricity is None:
            flags.append("no-electricity-row")
        else:
            kwh_pue = kwh * electricity.pue
            carbon_kg = kwh_pue * electricity.carbon_g_per_kwh / 1000.0

    capacity: Decimal | None = None
    usage: Decimal | None = None
    idle: Decimal | None = None
    currency = ""
    if rate is None:
        flags.append("no-accelerator-price")
    else:
        price = rate.price_per_accelerator_hour
        capacity, usage, idle = (as_decimal(h) * price for h in (alloc_h, busy_h, idle_h))
        currency = rate.currency

    energy: Decimal | None = None
    if kwh_pue is not None and electricity is not None and electricity.currency:
        energy = as_decimal(kwh_pue) * electricity.price_per_kwh
        if currency and electricity.currency != currency:
            try:
                energy = money_convert(
                    money=Money(amount=energy, currency=electricity.currency),
                    to_currency=currency,
                    rates=rates,
                ).amount
            except MissingRateError:
                flags.append("no-exchange-rate")
                energy = None
        elif not currency:
            currency = electricity.currency

    # Without a capacity price the day is unpriced (not "energy only"): the report counts its hours.
    total = None if capacity is None or "no-exchange-rate" in flags else capacity + (energy or Decimal(0))
    return HostDayCost(
        alloc_h=alloc_h,
        busy_h=busy_h,
        idle_h=idle_h,
        energy_kwh=kwh,
        energy_kwh_pue=kwh_pue,
        carbon_kg=carbon_kg,
        capacity=capacity,
        usage=usage,
        idle=idle,
        energy=energy,
        total=total,
        currency=currency,
        flags=tuple(flags),
    )
