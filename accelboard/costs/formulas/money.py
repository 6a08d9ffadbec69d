"""Money: the rounding rule, and currency conversion (only with a given rate).

The rounding rule for money, everywhere in accelboard:

1. Money is a ``Decimal`` from the price book's row to the stored figure; it is never a float.
2. A physical quantity (seconds, kWh, PUE, tokens: floats) enters a money product as
   ``Decimal(repr(x))``, its shortest decimal form (``as_decimal``), so 0.1 kWh is 0.1 and not
   0.1000000000000000055...; products and quotients keep Decimal's 28 significant digits.
3. Money is rounded once, when it is stored or exported (``money_round``): to the places of the
   column it goes to (4 for amounts, 6 for per-hour rates and per-1M-unit figures) with
   ROUND_HALF_EVEN, so the rounding of many rows does not drift their sum one way. Sums are made
   of the unrounded amounts of one computation, or of stored (already rounded) rows, never of a
   mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal

from .types import (
    CostInputError,
    ExchangeRate,
    MissingRateError,
    Money,
)

AMOUNT_PLACES = Decimal("0.0001")  # stored amounts (cost columns)
RATE_PLACES = Decimal("0.000001")  # per-hour rates and per-1M-unit figures


def as_decimal(value: float | int | Decimal) -> Decimal:
    """A quantity as a Decimal for a money product: its shortest decimal form (rule 2)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    return Decimal(repr(float(value)))


def money_round(amount: Decimal | None, places: Decimal = AMOUNT_PLACES) -> Decimal | None:
    """Round money for storage or export (rule 3): ``places`` (4 by default), half to even."""
    return None if amount is None else amount.quantize(places, rounding=ROUND_HALF_EVEN)


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
            factor = Decimal(1) / r.rate
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
