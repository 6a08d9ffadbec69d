"""Formatting for profile pages: microseconds as µs/ms/s, shares as percentages."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def us(value: Any) -> str:
    """``{{ 1234.5|us }}`` -> "1.23 ms"."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return "—"
    magnitude = abs(number)
    if magnitude < 0.05:
        return "0 µs"
    if magnitude >= 1e6:
        return f"{number / 1e6:,.3g} s" if magnitude < 1e8 else f"{number / 1e6:,.0f} s"
    if magnitude >= 1e3:
        return f"{number / 1e3:.3g} ms" if magnitude < 1e5 else f"{number / 1e3:,.0f} ms"
    return f"{number:.3g} µs"


@register.filter
def us_signed(value: Any) -> str:
    text = us(value)
    return "+" + text if value is not None and float(value) >= 0.05 else text


def _percent(number: float, *, signed: bool) -> str:
    """``number`` (already in percent) to 0.1%, with more digits where that would round a part of
    the whole to nothing or to all of it: 0.02% (not 0.0%), 99.97% (not 100.0%), -99.96% (not
    -100.0%). Exactly 0 and ±100 read as such."""
    sign = "+" if signed else ""
    if number in (0.0, 100.0, -100.0):
        return f"{number:{sign}.1f}%" if number else "0.0%"
    for digits in range(1, 5):
        text = f"{number:{sign}.{digits}f}"
        if float(text) not in (0.0, 100.0, -100.0):
            return text + "%"
    if abs(number) < 1:  # within 0.00005% of nothing
        return ("<" + sign if number > 0 else ">-") + "0.0001%"
    return f"{math.trunc(number * 1e4) / 1e4:{sign}.4f}%"  # within 0.00005% of all: 99.9999%


@register.filter
def pct(value: Any) -> str:
    """A share (0-1) as a percentage (``_percent``)."""
    if value is None or value == "":
        return "—"
    return _percent(100 * float(value), signed=False)


@register.filter
def pct_change(value: Any) -> str:
    """A change already in percent, signed (``_percent``)."""
    if value is None or value == "":
        return "—"
    number = float(value)
    return _percent(number, signed=True) if math.isfinite(number) else "—"


@register.filter
def ratio(value: Any, other: Any) -> float | None:
    try:
        return float(value) / float(other)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


@register.filter
def add_us(value: Any, other: Any) -> float | None:
    """Sum of two optional times (None + None stays None)."""
    if value is None and other is None:
        return None
    return float(value or 0.0) + float(other or 0.0)
