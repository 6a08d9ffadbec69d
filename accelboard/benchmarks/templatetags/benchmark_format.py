"""Number formatting for benchmark values: significant digits, not fixed decimals.

Django's ``floatformat`` pads 8.7 to "8.7000" and rounds 0.00012 to "0.0001"; a metric table
mixing requests/s, ms and bytes needs each value shown to its own precision. The rules are
``accelboard.core.numbers``'s (no e-notation, at most four significant decimals, bytes in GiB).
"""

from __future__ import annotations

from typing import Any

from django import template

from accelboard.core import numbers

register = template.Library()


@register.filter
def sig(value: Any, sign: str = "") -> str:
    """``{{ v|sig }}``: 6 significant digits (at most 4 of them decimals) with thousands
    separators, never e-notation (``0.000012``); ``{{ v|sig:"+" }}`` signs it."""
    return numbers.sig(value, sign)


@register.filter
def fixed(value: Any, decimals: Any) -> str:
    """``{{ v|fixed:decimals }}``: exactly ``decimals`` decimals, thousands separators (parts
    written to one precision, so that they visibly add up to their total)."""
    return numbers.fixed(value, int(decimals or 0))


@register.filter
def spread(value: Any) -> str:
    """``{{ v|spread }}``: the ± beside a level, three significant digits (``core.numbers``)."""
    return numbers.spread(value)


@register.filter
def metric_value(value: Any, unit: str = "") -> str:
    """A metric's value in its display unit: bytes as GiB (``71.1 GiB``), anything else ``sig``."""
    if unit == "bytes":
        return numbers.bytes_text(value, ("GiB", 2**30))
    return numbers.sig(value)


@register.filter
def metric_delta(value: Any, unit: str = "") -> str:
    """A signed difference of two values of a metric, in its display unit."""
    if unit == "bytes":
        number = numbers.finite(value)
        return numbers.DASH if number is None else f"{numbers.sig(number / 2**30, '+', digits=4)} GiB"
    return numbers.sig(value, "+")


@register.filter
def display_unit(unit: str) -> str:
    """The unit a metric's values are written in (``bytes`` -> ``GiB``)."""
    return "GiB" if unit == "bytes" else unit


@register.filter
def quantity(value: Any, unit: str = "") -> str:
    """A value with its unit: bytes in a binary unit (``71.1 GiB``), anything else ``sig`` and the
    unit (``4,655.19 ms``)."""
    if unit == "bytes":
        return numbers.bytes_text(value)
    return f"{numbers.sig(value)} {unit}".rstrip()


@register.simple_tag
def level(mean: Any, spread_value: Any, unit: str = "") -> str:
    """``{% level mean spread unit %}``: "4,655.19 ± 62.4 ms", "71.2 GiB ± 118 MiB"
    (``core.numbers.level_text``)."""
    return numbers.level_text(mean, spread_value, unit) or numbers.DASH


@register.filter
def money_rate(value: Any) -> str:
    """``{{ price|money_rate }}``: a price per hour or per kWh, "6.39", "0.253" (``core.numbers``)."""
    return numbers.money_rate(value)


@register.filter
def energy(joules: Any) -> str:
    """``{{ j|energy }}``: "30.3 J", "4.12 kJ", "12.4 kWh" (``core.numbers.energy_text``)."""
    return numbers.energy_text(joules)


@register.filter
def p_value(value: Any) -> str:
    """``{{ p|p_value }}``: "0.012", "< 0.001" (``core.numbers.p_value``)."""
    return numbers.p_value(value)
