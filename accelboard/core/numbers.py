"""How accelboard writes numbers, on every page, chart label, export and email.

Pure (no Django): the template filters (``benchmark_format.sig``, ``hardware_format``, the cost
tables) and the emails call these, so a figure reads the same wherever it is shown.

The rules:

1. Never e-notation, never float noise: a value is rounded to what it is written with.
2. At most four significant decimals (``0.7087``, ``0.001902``, ``0.000012``): run-to-run noise
   is larger than the fifth, and a long tail of digits hides the figure. Past two decimals a
   figure has at most four significant digits in all (``6.393``, ``30.33``, never ``6.3927``
   or ``30.3262``); from 10 up it carries two decimals at most (``4,890.12``, ``19,056.6``).
3. One format per column: a table column is written with one number of decimals
   (``column_decimals``), enough for the smallest value in it to keep three significant digits.
4. Bytes are never shown raw: ``bytes_text`` writes GiB (or MiB/KiB for small values), and a
   column of bytes picks one unit for all its rows (``bytes_unit``).
5. Money carries two decimals; rates of money (per GPU-hour, per 1M units) as many as their
   column needs (rule 3).
6. A spread (the ± beside a level) has three significant digits (``spread``): it is itself an
   estimate, good to a few per cent; the alert chart's legend, the alert page and the emails
   write it alike ("± 62.4", never "± 62.4314"); a level of bytes and its spread each in a
   binary unit (``level_text``: "71.2 GiB ± 118 MiB", never "76,403,379,358 ± 123,338,559 bytes").
7. Prices per hour (and other rates of money) carry cents, and three significant digits below
   one unit (``money_rate``: "6.39 USD/h", "0.253", "0.049"), never "6.3927".
8. Energy has three significant digits in a unit that scales (``energy_text``: "30.3 J",
   "4.12 kJ", "1.35 MJ", "12.4 kWh"), never "30.3262 J".
9. A p-value has two significant digits, and below 0.001 is written "< 0.001" (``p_value``):
   nobody reads 0.0000006948, and the test's assumptions do not hold that far out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

DASH = "—"
MAX_SIGNIFICANT_DECIMALS = 4
SIGNIFICANT_DIGITS = 6
# Below this a whole number reads better in full than rounded (token counts, requests).
WHOLE_FROM = 1e6
BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (missing, text, NaN, infinite)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def sig_decimals(number: float, digits: int = SIGNIFICANT_DIGITS) -> int:
    """Decimals that write ``number`` with ``digits`` significant digits, but never more than
    four significant decimals nor, past two decimals, four significant digits in all (rule 2):
    19056.63 -> 1, 50.2695 -> 2, 6.3927 -> 3, 0.708716 -> 4, 0.0000123 -> 8."""
    if number == 0:
        return 0
    exponent = math.floor(math.log10(abs(number)))
    if exponent >= 0:
        # Past two decimals, four significant digits in all (rule 2): 6.393, 30.33, 4,890.12.
        most = 3 if exponent == 0 else 2
        return max(0, min(digits - 1 - exponent, most))
    # -exponent - 1 zeros after the point before the first significant digit.
    return -exponent - 1 + min(digits, MAX_SIGNIFICANT_DECIMALS)


def _strip(text: str) -> str:
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "+0") else text


def sig(value: Any, sign: str = "", digits: int = SIGNIFICANT_DIGITS) -> str:
    """A measured value: ``digits`` significant digits (at most four of them decimals),
    thousands separators, no trailing zeros; whole from a million up. ``sign="+"`` signs it."""
    number = finite(value)
    if number is None:
        return DASH if value is None or value == "" else str(value)
    if abs(number) >= WHOLE_FROM:
        text = f"{number:,.0f}"
    else:
        text = _strip(f"{number:,.{sig_decimals(number, digits)}f}")
    if sign == "+" and number > 0 and not text.startswith("+"):
        text = "+" + text
    return text


SPREAD_DIGITS = 3


def spread(value: Any) -> str:
    """A spread (± one standard deviation) to three significant digits (rule 6): 62.4314 -> 62.4,
    27.4642 -> 27.5, 0.0012345 -> 0.00123, 1234.6 -> 1,235 (never e-notation)."""
    return sig(value, digits=SPREAD_DIGITS)


def column_decimals(values: Iterable[Any], *, significant: int = 3, most: int = 6) -> int:
    """One number of decimals for a whole column (rule 3): enough for its smallest non-zero value
    to keep ``significant`` digits, at most ``most``; whole numbers from 100 up need none."""
    smallest = min((abs(n) for n in (finite(v) for v in values) if n), default=None)
    if smallest is None:
        return 0
    exponent = math.floor(math.log10(smallest))
    return max(0, min(significant - 1 - exponent, most))


def column_fits(values: Iterable[Any], decimals: int) -> bool:
    """Whether one number of decimals writes every value of a column within rule 2: two decimals
    at most, or no value past four significant digits. A column spanning 0.0066 to 112.918 does
    not ("112.9180"): it is written value by value (``sig(v, digits=4)``) and says so."""
    if decimals <= 2:
        return True
    largest = max((abs(n) for n in (finite(v) for v in values) if n), default=0.0)
    return largest == 0 or math.floor(math.log10(largest)) + 1 + decimals <= 4


def fixed(value: Any, decimals: int, sign: str = "") -> str:
    """``value`` with exactly ``decimals`` decimals and thousands separators (a column's format)."""
    number = finite(value)
    if number is None:
        return DASH
    text = f"{number:,.{int(decimals)}f}"
    if sign == "+" and number > 0:
        text = "+" + text
    return text


def pct(value: Any, digits: int = 2) -> str:
    """A fraction as a percentage: 0.0123 -> "1.23%"; "—" for none (drift pages, alert emails)."""
    number = finite(value)
    return DASH if number is None else f"{number * 100:.{int(digits)}f}%"


def money(value: Any, decimals: int = 2) -> str:
    """Money: thousands separators and two decimals (``1,234.50``)."""
    return fixed(value, decimals)


def display_unit(unit: str) -> tuple[str, float]:
    """The unit a metric is shown in and what to divide its stored values by: bytes are shown
    in GiB (``("GiB", 2**30)``), anything else as stored (``(unit, 1)``)."""
    return ("GiB", float(2**30)) if unit == "bytes" else (unit, 1.0)


def bytes_unit(values: Iterable[Any]) -> tuple[str, int]:
    """The binary unit (name, bytes) that writes the largest of ``values`` as at least 1."""
    largest = max((abs(n) for n in (finite(v) for v in values) if n is not None), default=0.0)
    for name, size in BYTE_UNITS:
        if largest >= size:
            return name, size
    return "B", 1


def bytes_text(value: Any, unit: tuple[str, int] | None = None, digits: int = 4) -> str:
    """A byte count in a binary unit: ``71.1 GiB`` (never ``76,339,878,590 bytes``)."""
    number = finite(value)
    if number is None:
        return DASH
    name, size = unit or bytes_unit([number])
    scaled = number / size
    return f"{sig(scaled, digits=digits if size > 1 else 6)} {name}"


def level_text(mean: Any, spread_value: Any, unit: str) -> str:
    """A level and its spread in ``unit`` (rule 6): "4,655.19 ± 62.4 ms"; bytes each in a binary
    unit ("71.2 GiB ± 118 MiB"); "" without a level."""
    if finite(mean) is None:
        return ""
    if unit == "bytes":
        text = bytes_text(mean)
        if finite(spread_value) is not None:
            text += f" ± {bytes_text(spread_value, digits=SPREAD_DIGITS)}"
        return text
    text = sig(mean)
    if finite(spread_value) is not None:
        text += f" ± {spread(spread_value)}"
    return f"{text} {unit}".rstrip()


MONEY_RATE_DIGITS = 3


def money_rate(value: Any) -> str:
    """A price per hour or per unit (rule 7): cents from one up ("6.39", "1,234.50"), three
    significant digits below (``0.2525`` -> "0.253", ``0.049`` -> "0.049", ``0.8`` -> "0.80")."""
    number = finite(value)
    if number is None:
        return DASH
    if number == 0 or abs(number) >= 1:
        return f"{number:,.2f}"
    exponent = math.floor(math.log10(abs(number)))
    text = f"{number:,.{-exponent - 1 + MONEY_RATE_DIGITS}f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


ENERGY_DIGITS = 3
ENERGY_UNITS = (("kWh", 3.6e6 * 10), ("MJ", 1e6), ("kJ", 1e3))


def energy_text(joules: Any) -> str:
    """Energy in joules written in a unit that scales, three significant digits (rule 8):
    30.3262 -> "30.3 J", 4120 -> "4.12 kJ", 1.35e6 -> "1.35 MJ", 4.46e7 -> "12.4 kWh"."""
    number = finite(joules)
    if number is None:
        return DASH
    for name, size in ENERGY_UNITS:
        if abs(number) >= size:
            scale = 3.6e6 if name == "kWh" else size
            return f"{sig(number / scale, digits=ENERGY_DIGITS)} {name}"
    return f"{sig(number, digits=ENERGY_DIGITS)} J"


P_VALUE_FLOOR = 0.001


def p_value(value: Any) -> str:
    """A p-value (rule 9): two significant digits ("0.012", "0.35"), "< 0.001" below 0.001."""
    number = finite(value)
    if number is None:
        return DASH
    if number < P_VALUE_FLOOR:
        return f"< {P_VALUE_FLOOR:g}"
    return sig(number, digits=2)


def p_value_text(value: Any) -> str:
    """A p-value in a sentence (rule 9): "p = 0.012", "p < 0.001"."""
    text = p_value(value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"
