"""Number formatting for benchmark values: significant digits, not fixed decimals.

Django's ``floatformat`` pads 8.7 to "8.7000" and rounds 0.00012 to "0.0001"; a metric table
mixing requests/s, ms and bytes needs each value shown to its own precision.
"""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def sig(value: Any, sign: str = "") -> str:
    """``{{ v|sig }}``: 6 significant digits with thousands separators; ``{{ v|sig:"+" }}`` signs it."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    # Whole numbers at or above a million (bytes, token counts) read better in full than as 1.55e+10.
    text = f"{number:,.0f}" if abs(number) >= 1e6 else f"{number:,.6g}"
    if sign == "+" and number > 0:
        text = "+" + text
    return text
