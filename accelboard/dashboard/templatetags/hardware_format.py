"""Number formatting for the hardware page: four significant digits.

The comparison table puts thirteen figures side by side on a laptop screen; six digits (the run
pages' ``sig``) overflow it and imply a precision that run-to-run noise (1-3%) does not have.
"""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def sig4(value: Any) -> str:
    """``{{ v|sig4 }}``: 4 significant digits with thousands separators; "—" for a missing value."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.4g}"
