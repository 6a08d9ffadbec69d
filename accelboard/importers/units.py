"""Unit conversions and tolerant number reading shared by every importer.

accelboard stores latency in ms, throughput per second, power in W, energy in J, memory in bytes,
carbon in gCO2e. Tools write ns (MLPerf), s (llmperf, optimum-benchmark,
pytest-benchmark, vLLM per-request arrays), ms (vLLM summary keys), kWh (CodeCarbon,
optimum-benchmark) and strings with the unit inside the cell ("123.45 W", nvidia-smi).
Sentinels ("[N/A]", "[Not Supported]", "", "N/A") mean "not measured" and become None.
"""

from __future__ import annotations

import math
import re
from typing import Any

# factor to the canonical unit of the same dimension
_FACTORS: dict[str, tuple[str, float]] = {
    "ns": ("ms", 1e-6),
    "us": ("ms", 1e-3),
    "µs": ("ms", 1e-3),
    "ms": ("ms", 1.0),
    "s": ("ms", 1e3),
    "sec": ("ms", 1e3),
    "mw": ("W", 1e-3),
    "w": ("W", 1.0),
    "kw": ("W", 1e3),
    "mj": ("J", 1e-3),
    "j": ("J", 1.0),
    "kj": ("J", 1e3),
    "wh": ("J", 3.6e3),
    "kwh": ("J", 3.6e6),
    "b": ("bytes", 1.0),
    "bytes": ("bytes", 1.0),
    "kib": ("bytes", 1024.0),
    "mib": ("bytes", 1024.0**2),
    "gib": ("bytes", 1024.0**3),
    # optimum-benchmark's "MB" is 1e6 bytes (its trackers divide by 1e6); CodeCarbon's GB likewise.
    "kb": ("bytes", 1e3),
    "mb": ("bytes", 1e6),
    "gb": ("bytes", 1e9),
    "mhz": ("MHz", 1.0),
    "ghz": ("MHz", 1e3),
    "%": ("%", 1.0),
    "c": ("°C", 1.0),
    "°c": ("°C", 1.0),
    "kg": ("gCO2e", 1e3),
    "kgco2eq": ("gCO2e", 1e3),
    "g": ("gCO2e", 1.0),
}

SENTINELS = {
    "",
    "-",
    "n/a",
    "na",
    "none",
    "null",
    "nan",
    "[n/a]",
    "[not supported]",
    "[unknown error]",
    "[insufficient permissions]",
    "[gpu is lost]",
    "[requested functionality has been deprecated]",
}

_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*?)?\s*$")


class UnitError(ValueError):
    pass


def is_sentinel(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in SENTINELS)


def to_float(value: Any) -> float | None:
    """A number from an int, float or numeric string; None for sentinels. Raises on anything else.

    Booleans are refused (``True`` is not 1.0 in a benchmark file), NaN becomes None."""
    if is_sentinel(value):
        return None
    if isinstance(value, bool):
        raise UnitError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(",", "") if _looks_grouped(value) else value.strip()
        if text.lower() in {"inf", "+inf", "infinity"}:
            return math.inf
        if not _NUMBER.match(text):
            raise UnitError(f"expected a number, got {value!r}")
        number = float(text)
    else:
        raise UnitError(f"expected a number, got {type(value).__name__} {value!r}")
    return None if math.isnan(number) else number


def _looks_grouped(text: str) -> bool:
    return bool(re.fullmatch(r"\s*\d{1,3}(,\d{3})+(\.\d+)?\s*", text))


def to_int(value: Any) -> int | None:
    number = to_float(value)
    if number is None:
        return None
    if not math.isfinite(number) or number != int(number):
        raise UnitError(f"expected a whole number, got {value!r}")
    return int(number)


def parse_quantity(cell: Any) -> tuple[float | None, str]:
    """``"123.45 W"`` -> (123.45, "W"); ``"[N/A]"`` -> (None, ""); ``"42"`` -> (42.0, "")."""
    if is_sentinel(cell):
        return None, ""
    if isinstance(cell, int | float) and not isinstance(cell, bool):
        return to_float(cell), ""
    match = _QUANTITY.match(str(cell))
    if not match:
        raise UnitError(f"expected a number with an optional unit, got {cell!r}")
    return to_float(match.group(1)), (match.group(2) or "").strip()


def convert(value: float | None, unit: str, to: str) -> float | None:
    """Convert between units of one dimension: ``convert(5e6, "ns", "ms") == 5.0``."""
    if value is None:
        return None
    src = _FACTORS.get(unit.strip().lower())
    dst = _FACTORS.get(to.strip().lower())
    if src is None or dst is None or src[0] != dst[0]:
        raise UnitError(f"cannot convert {unit!r} to {to!r}")
    return value * src[1] / dst[1]


def ns_to_ms(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def kwh_to_j(value: float | None) -> float | None:
    return None if value is None else value * 3.6e6


def percentile_token(text: str) -> str:
    """``"99.90"`` -> ``"p999"``, ``"50.00"`` -> ``"p50"``, ``"99"`` -> ``"p99"`` (metric names)."""
    number = float(text)
    if number == int(number):
        return f"p{int(number)}"
    return "p" + f"{number:g}".replace(".", "")
