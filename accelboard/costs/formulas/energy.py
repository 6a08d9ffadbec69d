"""Energy from counters (segment-aware across resets) or integrated power; kWh, PUE, carbon."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .types import (
    J_PER_KWH,
    CostInputError,
    ElectricityRate,
    Energy,
    EnergyFootprint,
    _check_electricity,
)

# ---------------------------------------------------------------------------------------------
# Energy
# ---------------------------------------------------------------------------------------------


def _as_float_array(name: str, values: Sequence[float | None] | np.ndarray | pd.Series) -> np.ndarray:
    try:
        # None becomes NaN (a missing reading); text that is not a number is refused.
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise CostInputError(f"{name}: not numbers ({exc})") from exc


def _series_prepare(
    times_s: Sequence[float] | np.ndarray, values: Sequence[float | None] | np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray]:
    t = _as_float_array("times_s", times_s)
    v = _as_float_array(name, values)
    if t.shape != v.shape:
        raise CostInputError(f"times_s and {name} differ in length ({t.size} != {v.size})")
    if np.isnan(t).any():
        raise CostInputError("times_s: missing time")
    if t.size > 1 and (np.diff(t) <= 0).any():
        raise CostInputError("times_s: not strictly increasing")
    return t, v


def _cumulative_counter_j(t: np.ndarray, mj: np.ndarray, max_gap_s: float) -> tuple[np.ndarray, dict]:
    """Cumulative energy (J) at each sample from an energy counter (mJ), segment-aware.

    1. Missing readings (NaN) are dropped; a step between two readings is one interval.
    2. A counter that went down was reset (driver reload): the interval across the reset adds
       nothing (its energy is unknown) and a new segment starts at the lower reading.
    3. An interval longer than ``max_gap_s`` adds its delta if the counter kept counting (the
       counter integrates through telemetry gaps, unlike power samples), but its time is a gap.
    """
    ok = ~np.isnan(mj)
    tt, vv = t[ok], mj[ok]
    cum = np.zeros(tt.size)
    segments = 1 if tt.size else 0
    gap_s = covered_s = 0.0
    if tt.size > 1:
        d = np.diff(vv)
        dt = np.diff(tt)
        reset = d < 0
        segments += int(reset.sum())
        step = np.where(reset, 0.0, d) / 1000.0
        cum[1:] = np.cumsum(step)
        gap_s = float(dt[(dt > max_gap_s) | reset].sum())
        covered_s = float(dt.sum()) - gap_s
    # Back onto the full time axis (missing readings take the value reached before them).
    full = np.full(t.size, np.nan)
    full[ok] = cum
    full = pd.Series(full).ffill().fillna(0.0).to_numpy()
    return full, {"segments": segments, "gap_s": gap_s, "covered_s": covered_s}


def _cumulative_power_j(t: np.ndarray, w: np.ndarray, max_gap_s: float) -> tuple[np.ndarray, dict]:
    """Cumulative energy (J) at each sample by the trapezoid rule over power (W).

    An interval adds energy only if both ends have a power reading and it is at most
    ``max_gap_s`` long: a gap in telemetry is a gap, never a guess.
    """
    cum = np.zeros(t.size)
    gap_s = covered_s = 0.0
    if t.size > 1:
        dt = np.diff(t)
        usable = ~np.isnan(w[:-1]) & ~np.isnan(w[1:]) & (dt <= max_gap_s)
        area = np.where(usable, (np.nan_to_num(w[:-1]) + np.nan_to_num(w[1:])) / 2.0 * dt, 0.0)
        cum[1:] = np.cumsum(area)
        covered_s = float(dt[usable].sum())
        gap_s = float(dt[~usable].sum())
    return cum, {"segments": 1 if t.size else 0, "gap_s": gap_s, "covered_s": covered_s}


def _energy_cumulative(
    *,
    times_s: Sequence[float] | np.ndarray,
    energy_mj: Sequence[float | None] | np.ndarray | None,
    power_w: Sequence[float | None] | np.ndarray | None,
    max_gap_s: float,
) -> tuple[np.ndarray, np.ndarray, str, dict]:
    if max_gap_s <= 0:
        raise CostInputError("max_gap_s: must be positive")
    if energy_mj is not None:
        t, mj = _series_prepare(times_s, energy_mj, "energy_mj")
        if (~np.isnan(mj)).sum() >= 2:
            cum, info = _cumulative_counter_j(t, mj, max_gap_s)
            return t, cum, "counter", info
    if power_w is not None:
        t, w = _series_prepare(times_s, power_w, "power_w")
        if (w[~np.isnan(w)] < 0).any():
            raise CostInputError("power_w: negative power")
        cum, info = _cumulative_power_j(t, w, max_gap_s)
        return t, cum, "power", info
    raise CostInputError("energy_mj, power_w: neither an energy counter nor power readings were given")


def energy_measure(
    *,
    times_s: Sequence[float] | np.ndarray,
    energy_mj: Sequence[float | None] | np.ndarray | None = None,
    power_w: Sequence[float | None] | np.ndarray | None = None,
    max_gap_s: float = 60.0,
) -> Energy:
    """Energy (J) of one GPU over a series of samples at ``times_s`` (seconds, increasing).

    Uses the energy counter (mJ, segment-aware across resets) where it has at least two readings,
    otherwise integrates power (W) by the trapezoid rule, leaving gaps longer than ``max_gap_s``
    out. Returns the joules with the method, the segment count, and covered and gap seconds.
    """
    _, cum, method, info = _energy_cumulative(
        times_s=times_s, energy_mj=energy_mj, power_w=power_w, max_gap_s=max_gap_s
    )
    joules = float(cum[-1]) if cum.size else 0.0
    return Energy(
        joules=joules,
        method=method,
        segments=info["segments"],
        covered_s=info["covered_s"],
        gap_s=info["gap_s"],
        inputs={"samples": int(cum.size), "max_gap_s": max_gap_s},
    )


@dataclass(frozen=True)
class EnergyCrossCheck:
    """Counter and integrated-power energy over the same samples; ``disagree`` when they differ by
    more than the tolerance (relative to the counter). Both are kept: neither is silently chosen."""

    counter: Energy
    power: Energy
    relative_difference: float | None
    disagree: bool
    tolerance: float


def energy_cross_check(
    *,
    times_s: Sequence[float] | np.ndarray,
    energy_mj: Sequence[float | None] | np.ndarray,
    power_w: Sequence[float | None] | np.ndarray,
    max_gap_s: float = 60.0,
    tolerance: float = 0.05,
) -> EnergyCrossCheck:
    """Compare the energy counter with integrated power (flag > 5 % disagreement, a
    known NVML discrepancy, ml-energy/zeus issue 181). A counter reading 0 J while power is drawn
    disagrees by definition (relative difference None)."""
    counter = energy_measure(times_s=times_s, energy_mj=energy_mj, max_gap_s=max_gap_s)
    power = energy_measure(times_s=times_s, power_w=power_w, max_gap_s=max_gap_s)
    if counter.method != "counter":
        raise CostInputError("energy_mj: fewer than two counter readings to compare")
    if counter.joules > 0:
        gap = abs(power.joules - counter.joules) / counter.joules
        rel: float | None = gap
        disagree = gap > tolerance
    else:
        rel = None
        disagree = power.joules > 0
    return EnergyCrossCheck(
        counter=counter, power=power, relative_difference=rel, disagree=disagree, tolerance=tolerance
    )


def energy_in_window(
    *,
    times_s: Sequence[float] | np.ndarray,
    start_s: float,
    end_s: float,
    energy_mj: Sequence[float | None] | np.ndarray | None = None,
    power_w: Sequence[float | None] | np.ndarray | None = None,
    max_gap_s: float = 60.0,
) -> Energy:
    """Energy (J) between ``start_s`` and ``end_s``: the cumulative energy (counter or power, as in
    :func:`energy_measure`) interpolated linearly at both edges, so a window need not fall on
    samples. The window must lie within the samples' time span."""
    if end_s <= start_s:
        raise CostInputError(f"end_s: window end {end_s} is not after its start {start_s}")
    t, cum, method, info = _energy_cumulative(
        times_s=times_s, energy_mj=energy_mj, power_w=power_w, max_gap_s=max_gap_s
    )
    if t.size < 2 or start_s < t[0] or end_s > t[-1]:
        raise CostInputError(
            f"start_s, end_s: window [{start_s}, {end_s}] s is outside the samples' span"
            + (f" [{t[0]}, {t[-1]}] s" if t.size else "")
        )
    joules = float(np.interp(end_s, t, cum) - np.interp(start_s, t, cum))
    return Energy(
        joules=joules,
        method=method,
        segments=info["segments"],
        covered_s=end_s - start_s,
        gap_s=0.0,
        inputs={"start_s": start_s, "end_s": end_s, "max_gap_s": max_gap_s},
    )


def energy_footprint(*, joules: float, electricity: ElectricityRate) -> EnergyFootprint:
    """kWh = J / 3.6e6; facility kWh = kWh × PUE; carbon gCO2e = kWh × PUE × grid gCO2e/kWh."""
    if joules < 0:
        raise CostInputError("joules: negative energy")
    _check_electricity(electricity)
    kwh = joules / J_PER_KWH
    facility = kwh * electricity.pue
    return EnergyFootprint(
        kwh=kwh,
        facility_kwh=facility,
        carbon_g=facility * electricity.carbon_g_per_kwh,
        sources=(electricity.ref,),
        inputs={"joules": joules, "pue": electricity.pue, "carbon_g_per_kwh": electricity.carbon_g_per_kwh},
    )
