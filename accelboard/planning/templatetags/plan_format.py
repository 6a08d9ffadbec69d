"""Number formatting for the plan page: money without cents, rates to four significant digits,
shares as percentages; "—" for a figure that is not known (never a zero)."""

from __future__ import annotations

import math
from typing import Any

from django import template

from accelboard.core import numbers

register = template.Library()


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@register.filter
def money0(value: Any) -> str:
    """``12,345``: whole units of money (a monthly plan is not read to the cent)."""
    number = _number(value)
    return "—" if number is None else f"{number:,.0f}"


@register.filter
def sig(value: Any) -> str:
    """4 significant digits, thousands separators, never e-notation (``core.numbers``)."""
    return "—" if _number(value) is None else numbers.sig(value, digits=4)


@register.filter
def money_rate(value: Any) -> str:
    """A price per hour or per kWh: "6.39", "0.253" (``core.numbers.money_rate``)."""
    return numbers.money_rate(value)


@register.filter
def per1m(value: Any, decimals: Any = None) -> str:
    """Money per 1M tokens in its column's format (rules 3 and 5: ``decimals`` from
    ``core.numbers.column_decimals`` over the column, at least cents); value by value by rule 7
    (``money_rate``) when no one format fits the column (``0.0066`` beside ``330.07``)."""
    if decimals is None or decimals == "":
        return numbers.money_rate(value)
    return numbers.fixed(value, int(decimals))


@register.filter
def share(value: Any) -> str:
    """A 0-1 share as ``42 %``."""
    number = _number(value)
    return "—" if number is None else f"{100 * number:.0f} %"


@register.filter
def signed_share(value: Any) -> str:
    """A relative change as ``+12 %`` / ``−8 %``."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{100 * number:+.0f} %".replace("-", "−")


@register.filter
def pct2(value: Any) -> str:
    """A 0-1 share as ``0.71 %`` (accuracy losses are small)."""
    number = _number(value)
    return "—" if number is None else f"{100 * number:.2f} %"
