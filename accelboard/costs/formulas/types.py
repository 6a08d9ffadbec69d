"""Value types of the cost formulas: rates, exchange rates, money, and their errors.

Units are listed in :mod:`accelboard.costs.formulas`. Every result carries
``inputs`` and ``sources`` (:class:`PriceRef`) so a report can cite what a figure came from.

Money is ``Decimal`` here, from the price book's rows to the stored figure: prices per hour, per
kWh, exchange rates and every ``Money.amount``. Physical quantities (seconds, joules, kWh, PUE,
tokens) stay ``float``. How the two meet, and the one place money is rounded, is
:mod:`accelboard.costs.formulas.money`'s rounding rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

J_PER_KWH = 3_600_000.0
IDLE_UTIL_BELOW_PCT = 10.0


class CostInputError(ValueError):
    """An input to a formula is unusable (negative duration, mismatched arrays, ...)."""


class MissingRateError(LookupError):
    """A currency conversion was asked for without an exchange rate for that pair."""


@dataclass(frozen=True)
class PriceRef:
    """Where a number came from: a price-book row, an electricity row or an exchange rate."""

    kind: str  # "accelerator_price", "electricity_price", "exchange_rate"
    id: int | str | None
    source: str
    fetched_on: date | None = None
    stale: bool = False


@dataclass(frozen=True)
class AcceleratorRate:
    """A capacity price per accelerator-hour (an instance price divided by its accelerator count)."""

    price_per_accelerator_hour: Decimal
    currency: str
    ref: PriceRef


@dataclass(frozen=True)
class ElectricityRate:
    """A site's electricity price (per kWh at the meter), its PUE and its grid's carbon intensity."""

    price_per_kwh: Decimal
    currency: str
    pue: float
    carbon_g_per_kwh: float
    ref: PriceRef


@dataclass(frozen=True)
class ExchangeRate:
    """1 unit of ``from_currency`` = ``rate`` units of ``to_currency``."""

    from_currency: str
    to_currency: str
    rate: Decimal
    ref: PriceRef


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str
    sources: tuple[PriceRef, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)
