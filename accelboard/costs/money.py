"""Capacity and energy cost, currency conversion (only with a given rate) and sums."""

from __future__ import annotations

from collections.abc import Sequence

from .types import (
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    ExchangeRate,
    MissingRateError,
    Money,
    PriceRef,
    _check_electricity,
)

# Money
# ---------------------------------------------------------------------------------------------


def capacity_cost(*, accelerator_seconds: float, rate: AcceleratorRate) -> Money:
    """Capacity cost = accelerator-seconds × price per accelerator-hour / 3600."""
    if accelerator_seconds < 0:
        raise CostInputError("accelerator_seconds: negative")
    if rate.price_per_accelerator_hour <= 0:
        raise CostInputError("price_per_accelerator_hour: must be positive")
    return Money(
        amount=accelerator_seconds * rate.price_per_accelerator_hour / 3600.0,
        currency=rate.currency,
        sources=(rate.ref,),
        inputs={
            "accelerator_seconds": accelerator_seconds,
            "price_per_accelerator_hour": rate.price_per_accelerator_hour,
        },
    )


def energy_cost(*, kwh: float, electricity: ElectricityRate) -> Money:
    """Energy cost = kWh (at the device) × PUE × price per kWh."""
    if kwh < 0:
        raise CostInputError("kwh: negative energy")
    _check_electricity(electricity)
    return Money(
        amount=kwh * electricity.pue * electricity.price_per_kwh,
        currency=electricity.currency,
        sources=(electricity.ref,),
        inputs={"kwh": kwh, "pue": electricity.pue, "price_per_kwh": electricity.price_per_kwh},
    )


def money_convert(*, money: Money, to_currency: str, rates: Sequence[ExchangeRate]) -> Money:
    """``money`` in ``to_currency`` using a given rate for that pair (or its inverse).

    Raises :class:`MissingRateError` when no rate for the pair was given: never guessed.
    """
    if money.currency == to_currency:
        return money
    for r in rates:
        if r.rate <= 0:
            raise CostInputError(f"rate: {r.from_currency}->{r.to_currency} rate {r.rate} is not positive")
        if (r.from_currency, r.to_currency) == (money.currency, to_currency):
            factor = r.rate
        elif (r.from_currency, r.to_currency) == (to_currency, money.currency):
            factor = 1.0 / r.rate
        else:
            continue
        return Money(
            amount=money.amount * factor,
            currency=to_currency,
            sources=(*money.sources, r.ref),
            inputs={**money.inputs, "converted_from": money.currency, "exchange_rate": factor},
        )
    raise MissingRateError(
        f"currency: no exchange rate from {money.currency} to {to_currency} in the price book"
    )


def money_add(*, items: Sequence[Money]) -> Money:
    """The sum of amounts in one currency, with all their sources (mixing currencies is an error)."""
    currencies = {m.currency for m in items}
    if len(currencies) > 1:
        raise CostInputError(f"currency: cannot add {', '.join(sorted(currencies))} without conversion")
    sources: list[PriceRef] = []
    for m in items:
        sources.extend(s for s in m.sources if s not in sources)
    return Money(
        amount=float(sum(m.amount for m in items)),
        currency=currencies.pop() if currencies else "",
        sources=tuple(sources),
        inputs={"parts": [m.amount for m in items]},
    )


# ---------------------------------------------------------------------------------------------
