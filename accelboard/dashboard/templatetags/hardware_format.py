"""Number formatting for the hardware page: four significant digits.

The comparison table puts thirteen figures side by side on a laptop screen; six digits (the run
pages' ``sig``) overflow it and imply a precision that run-to-run noise (1-3%) does not have.
"""

from __future__ import annotations

import math
from typing import Any

from django import template

from accelboard.core import numbers

register = template.Library()


@register.filter
def fixed(value: Any, decimals: Any) -> str:
    """``{{ v|fixed:decimals.p99 }}``: the column's one number of decimals, thousands separators."""
    return numbers.fixed(value, int(decimals or 0))


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``{{ price_bases|get:p.label }}``: a dict value by a variable key."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def price_lines(basis: str) -> list[str]:
    """``0.80 USD/GPU-hour, dgx-h100 on-prem (amortised)`` -> the price and the price row, each on
    its own line under a hardware name (wrapped as one, it broke at "dgx-" and widened the table)."""
    price, _, rest = str(basis).partition(", ")
    return [f"{price},", rest] if rest else [price]


@register.filter
def sig4(value: Any) -> str:
    """``{{ v|sig4 }}``: 4 significant digits with thousands separators; "—" for a missing value."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    return numbers.sig(number, digits=4)


@register.filter
def energy(joules: Any) -> str:
    """``{{ j|energy }}``: "4.12 kJ", "12.4 kWh" (``core.numbers.energy_text``)."""
    return numbers.energy_text(joules)
