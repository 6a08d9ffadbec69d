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


@register.filter
def pct(value: Any) -> str:
    """A share as a percentage to 0.1%; a share that is not nothing (or not all) never rounds to
    0.0% (100.0%): ``<0.1%`` (``>99.9%``)."""
    if value is None or value == "":
        return "—"
    share = float(value)
    if 0 < share < 0.0005:
        return "<0.1%"
    if 0.9995 <= share < 1:
        return ">99.9%"
    return f"{100 * share:.1f}%"


@register.filter
def pct_change(value: Any) -> str:
    """A change already in percent, signed, to 0.1%: a change that is not nothing never reads
    ``+0.0%`` (``<+0.1%``), and a time cut short of all of it never ``-100.0%`` (``>-100.0%``)."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return "—"
    if 0 < abs(number) < 0.05:
        return "<+0.1%" if number > 0 else "<-0.1%"
    if -100 < number <= -99.95:
        return ">-100.0%"
    return "0.0%" if number == 0 else f"{number:+.1f}%"


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
