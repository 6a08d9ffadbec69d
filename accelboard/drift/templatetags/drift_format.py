"""Display of drift figures: fractions as percentages, ratios as "×", bytes as GiB; "—" for none."""

from __future__ import annotations

import math
from typing import Any

from django import template

from accelboard.core import numbers

register = template.Library()
DASH = "—"


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@register.filter
def pct(value: Any, digits: int = 2) -> str:
    """0.0123 -> "1.23%" (``core.numbers.pct``)."""
    return numbers.pct(value, digits)


@register.filter
def signed_pct(value: Any, digits: int = 2) -> str:
    """0.0123 -> "+1.23%" (a saving or a change)."""
    number = _number(value)
    return DASH if number is None else f"{number * 100:+.{int(digits)}f}%"


@register.filter
def times(value: Any) -> str:
    """1.5106 -> "1.51×"."""
    number = _number(value)
    return DASH if number is None else f"{number:.2f}×"


@register.filter
def gib(value: Any) -> str:
    number = _number(value)
    return DASH if number is None else f"{number / 2**30:.1f} GiB"


@register.filter
def days(value: Any) -> str:
    number = _number(value)
    return DASH if number is None else f"{number:.0f} d"


@register.filter
def count(value: Any) -> str:
    """7951 -> "7,951": counts with thousands separators."""
    number = _number(value)
    return DASH if number is None else f"{number:,.0f}"


@register.filter
def neg(value: Any) -> float | None:
    """A loss shown as an accuracy delta: 0.012 -> -0.012."""
    number = _number(value)
    return None if number is None else -number


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """A dict value by a variable key (a task column of the variants table)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def rate(value: Any) -> str:
    """A throughput to three significant digits: 27,119.8 -> "27,120", 0.9 -> "0.9" (never "1
    samples/s" for 0.9; variants of one model sit within a few times of each other, so a column
    of them keeps one format)."""
    return numbers.sig(value, digits=3)
