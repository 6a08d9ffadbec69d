"""Cost, energy and carbon formulas: pure functions on plain data, numpy and pandas (no Django).

Units follow ``shared/DESIGN.md``: time in seconds (hours where named ``_h``), power W, energy J
(kWh where named ``_kwh``), energy counters mJ, money as a float amount with an ISO currency code,
carbon gCO2e. Money is computed in floats; whoever stores it rounds it to a decimal.

Every result carries what it was computed from: ``inputs`` (the numbers used) and ``sources``
(the price rows, electricity rows and exchange rates passed in, as :class:`PriceRef`), so that a
report can cite each figure's inputs. Nothing here guesses a price, a PUE or an exchange rate:
they are arguments, and a missing exchange rate raises :class:`MissingRateError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pandas as pd

J_PER_KWH = 3_600_000.0
IDLE_UTIL_BELOW_PCT = 10.0
# ML.ENERGY's stability rules (DESIGN.md, "Benchmark windows and energy per inference").
STEADY_STATE_MIN_S = 20.0
MEAN_BATCH_RATIO_MIN = 0.85


class CostInputError(ValueError):
    """An input to a formula is unusable (negative duration, mismatched arrays, ...)."""


class MissingRateError(LookupError):
    """A currency conversion was asked for without an exchange rate for that pair."""


@dataclass(frozen=True)
class PriceRef:
    """Where a number came from: a price-book row, an electricity row or an exchange rate."""

    kind: str  # "accelerator_price", "electricity_price", "exchange_rate"
    id: int | str | None
    source: str
    fetched_on: date | None = None
    stale: bool = False


@dataclass(frozen=True)
class AcceleratorRate:
    """A capacity price per accelerator-hour (an instance price divided by its accelerator count)."""

    price_per_accelerator_hour: float
    currency: str
    ref: PriceRef


@dataclass(frozen=True)
class ElectricityRate:
    """A site's electricity price (per kWh at the meter), its PUE and its grid's carbon intensity."""

    price_per_kwh: float
    currency: str
    pue: float
    carbon_g_per_kwh: float
    ref: PriceRef


@dataclass(frozen=True)
class ExchangeRate:
    """1 unit of ``from_currency`` = ``rate`` units of ``to_currency``."""

    from_currency: str
    to_currency: str
    rate: float
    ref: PriceRef


@dataclass(frozen=True)
class Money:
    amount: float
    currency: str
    sources: tuple[PriceRef, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Energy:
    """Energy over a series. ``method`` is "counter" or "power"; ``segments`` counts counter segments
    (a reset starts a new one); ``gap_s`` is time between samples not counted as energy."""

    joules: float
    method: str
    segments: int
    covered_s: float
    gap_s: float
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kwh(self) -> float:
        return self.joules / J_PER_KWH


@dataclass(frozen=True)
class EnergyFootprint:
    """kWh at the device, kWh at the facility (× PUE), carbon, and the electricity row used."""

    kwh: float
    facility_kwh: float
    carbon_g: float
    sources: tuple[PriceRef, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AcceleratorHours:
    """Accelerator-hours held (allocation), weighted by utilisation (usage), idle (< 10 %), and
    hours held whose utilisation is unknown (counted in allocation, not in usage or idle)."""

    allocation_h: float
    usage_h: float
    idle_h: float
    unknown_util_h: float
    by_accelerator: pd.DataFrame
    inputs: Mapping[str, Any] = field(default_factory=dict)


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
    """Compare the energy counter with integrated power (DESIGN.md: flag > 5 % disagreement, a
    known NVML discrepancy, ml-energy/zeus issue 181). A counter reading 0 J while power is drawn
    disagrees by definition (relative difference None)."""
    counter = energy_measure(times_s=times_s, energy_mj=energy_mj, max_gap_s=max_gap_s)
    power = energy_measure(times_s=times_s, power_w=power_w, max_gap_s=max_gap_s)
    if counter.method != "counter":
        raise CostInputError("energy_mj: fewer than two counter readings to compare")
    if counter.joules > 0:
        rel: float | None = abs(power.joules - counter.joules) / counter.joules
        disagree = rel > tolerance
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


# ---------------------------------------------------------------------------------------------
# Accelerator-hours
# ---------------------------------------------------------------------------------------------


def _hours_summarise(frame: pd.DataFrame, inputs: dict[str, Any]) -> AcceleratorHours:
    by = (
        frame.groupby("accelerator", sort=True)[["allocation_h", "usage_h", "idle_h", "unknown_util_h"]]
        .sum()
        .reset_index()
    )
    return AcceleratorHours(
        allocation_h=float(frame["allocation_h"].sum()),
        usage_h=float(frame["usage_h"].sum()),
        idle_h=float(frame["idle_h"].sum()),
        unknown_util_h=float(frame["unknown_util_h"].sum()),
        by_accelerator=by,
        inputs=inputs,
    )


def _hours_columns(held_s: np.ndarray, util: np.ndarray) -> dict[str, np.ndarray]:
    if (util[~np.isnan(util)] < 0).any() or (util[~np.isnan(util)] > 100).any():
        raise CostInputError("gpu_util: utilisation outside 0-100 %")
    held_h = held_s / 3600.0
    known = ~np.isnan(util)
    return {
        "allocation_h": held_h,
        "usage_h": np.where(known, held_h * np.nan_to_num(util) / 100.0, 0.0),
        "idle_h": np.where(known & (util < IDLE_UTIL_BELOW_PCT), held_h, 0.0),
        "unknown_util_h": np.where(known, 0.0, held_h),
    }


def accelerator_hours_from_samples(*, samples: pd.DataFrame, max_gap_s: float = 60.0) -> AcceleratorHours:
    """Accelerator-hours from per-GPU samples (columns ``accelerator``, ``time``, ``gpu_util`` %).

    1. Per GPU, each sample holds the GPU until the next sample (a step function: the earlier
       sample's utilisation stands for the interval). The last sample holds nothing.
    2. An interval longer than ``max_gap_s`` is a telemetry gap: the GPU is not counted as held.
    3. Allocation = held hours; usage = held × utilisation / 100; idle = held where utilisation
       < 10 %; intervals whose utilisation is missing count in allocation and ``unknown_util_h``.
    ``time`` may be datetimes or seconds.
    """
    missing = {"accelerator", "time", "gpu_util"} - set(samples.columns)
    if missing:
        raise CostInputError(f"samples: missing column(s) {', '.join(sorted(missing))}")
    frame = samples[["accelerator", "time", "gpu_util"]].sort_values(["accelerator", "time"])
    t = frame["time"]
    t_s = (
        (t - pd.Timestamp(0, tz=t.dt.tz)).dt.total_seconds() if pd.api.types.is_datetime64_any_dtype(t) else t
    )
    t_s = t_s.astype(float)
    dt = t_s.groupby(frame["accelerator"]).diff(-1).mul(-1).to_numpy()
    if (dt[~np.isnan(dt)] <= 0).any():
        raise CostInputError("samples: two samples of one accelerator at the same time")
    held = np.where(np.isnan(dt) | (dt > max_gap_s), 0.0, dt)
    cols = _hours_columns(held, frame["gpu_util"].astype(float).to_numpy())
    out = pd.DataFrame({"accelerator": frame["accelerator"].to_numpy(), **cols})
    return _hours_summarise(out, {"samples": len(frame), "max_gap_s": max_gap_s})


def accelerator_hours_from_rollups(*, rollups: pd.DataFrame) -> AcceleratorHours:
    """Accelerator-hours from rollup rows (columns ``accelerator``, ``width_s``, ``gpu_util_avg`` %).

    Each row is a bucket the GPU reported in, held for its whole width; an optional ``covered_s``
    column (seconds of the bucket actually covered by samples) replaces the width where given.
    Allocation, usage and idle are as in :func:`accelerator_hours_from_samples`, with the
    bucket's average utilisation; a bucket's idleness is decided on its average.
    """
    missing = {"accelerator", "width_s", "gpu_util_avg"} - set(rollups.columns)
    if missing:
        raise CostInputError(f"rollups: missing column(s) {', '.join(sorted(missing))}")
    held = rollups["width_s"].astype(float).to_numpy()
    if "covered_s" in rollups.columns:
        covered = rollups["covered_s"].astype(float).to_numpy()
        held = np.where(np.isnan(covered), held, np.minimum(covered, held))
    if (held < 0).any():
        raise CostInputError("rollups: negative width_s or covered_s")
    cols = _hours_columns(held, rollups["gpu_util_avg"].astype(float).to_numpy())
    out = pd.DataFrame({"accelerator": rollups["accelerator"].to_numpy(), **cols})
    return _hours_summarise(out, {"rollups": len(rollups)})


# ---------------------------------------------------------------------------------------------
# Money
# ---------------------------------------------------------------------------------------------


def _check_electricity(electricity: ElectricityRate) -> None:
    if electricity.pue < 1.0:
        raise CostInputError(
            f"pue: {electricity.pue} is below 1 (a facility cannot use less than its IT load)"
        )
    if electricity.price_per_kwh < 0 or electricity.carbon_g_per_kwh < 0:
        raise CostInputError("price_per_kwh, carbon_g_per_kwh: negative")


def capacity_cost(*, accelerator_seconds: float, rate: AcceleratorRate) -> Money:
    """Capacity cost = accelerator-seconds × price per accelerator-hour / 3600."""
    if accelerator_seconds < 0:
        raise CostInputError("accelerator_seconds: negative")
    if rate.price_per_accelerator_hour <= 0:
        raise CostInputError("price_per_accelerator_hour: must be positive")
    return Money(
        amount=accelerator_seconds * rate.price_per_accelerator_hour / 3600.0,
        currency=rate.currency,
        sources=(rate.ref,),
        inputs={
            "accelerator_seconds": accelerator_seconds,
            "price_per_accelerator_hour": rate.price_per_accelerator_hour,
        },
    )


def energy_cost(*, kwh: float, electricity: ElectricityRate) -> Money:
    """Energy cost = kWh (at the device) × PUE × price per kWh."""
    if kwh < 0:
        raise CostInputError("kwh: negative energy")
    _check_electricity(electricity)
    return Money(
        amount=kwh * electricity.pue * electricity.price_per_kwh,
        currency=electricity.currency,
        sources=(electricity.ref,),
        inputs={"kwh": kwh, "pue": electricity.pue, "price_per_kwh": electricity.price_per_kwh},
    )


def money_convert(*, money: Money, to_currency: str, rates: Sequence[ExchangeRate]) -> Money:
    """``money`` in ``to_currency`` using a given rate for that pair (or its inverse).

    Raises :class:`MissingRateError` when no rate for the pair was given: never guessed.
    """
    if money.currency == to_currency:
        return money
    for r in rates:
        if r.rate <= 0:
            raise CostInputError(f"rate: {r.from_currency}->{r.to_currency} rate {r.rate} is not positive")
        if (r.from_currency, r.to_currency) == (money.currency, to_currency):
            factor = r.rate
        elif (r.from_currency, r.to_currency) == (to_currency, money.currency):
            factor = 1.0 / r.rate
        else:
            continue
        return Money(
            amount=money.amount * factor,
            currency=to_currency,
            sources=(*money.sources, r.ref),
            inputs={**money.inputs, "converted_from": money.currency, "exchange_rate": factor},
        )
    raise MissingRateError(
        f"currency: no exchange rate from {money.currency} to {to_currency} in the price book"
    )


def money_add(*, items: Sequence[Money]) -> Money:
    """The sum of amounts in one currency, with all their sources (mixing currencies is an error)."""
    currencies = {m.currency for m in items}
    if len(currencies) > 1:
        raise CostInputError(f"currency: cannot add {', '.join(sorted(currencies))} without conversion")
    sources: list[PriceRef] = []
    for m in items:
        sources.extend(s for s in m.sources if s not in sources)
    return Money(
        amount=float(sum(m.amount for m in items)),
        currency=currencies.pop() if currencies else "",
        sources=tuple(sources),
        inputs={"parts": [m.amount for m in items]},
    )


# ---------------------------------------------------------------------------------------------
# Benchmark runs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkCost:
    """Energy, cost and carbon per unit of work of one benchmark run (per 1M units for money and
    carbon). ``unit`` is "token" or "inference"; ``per_token`` fields are None without tokens."""

    unit: str
    throughput_per_s: float
    j_per_inference: float | None
    j_per_1k_inferences: float | None
    j_per_token: float | None
    capacity_per_1m: Money
    energy_per_1m: Money
    total_per_1m: Money
    carbon_g_per_1m: float
    facility_kwh_per_1m: float
    sources: tuple[PriceRef, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)


def benchmark_cost(
    *,
    duration_s: float,
    energy_j: float,
    inferences: float | None,
    tokens: float | None = None,
    accelerator_count: int,
    rate: AcceleratorRate,
    electricity: ElectricityRate,
) -> BenchmarkCost:
    """Per-unit energy, cost and carbon of a run that did ``inferences`` (and generated ``tokens``)
    in ``duration_s`` on ``accelerator_count`` accelerators drawing ``energy_j`` in all.

    Costs are per 1M tokens when tokens are given, else per 1M inferences, at the run's
    throughput: 1M units take 1e6 / throughput seconds of the accelerators (capacity) and
    1e6 × J per unit of energy (× PUE × price per kWh; × PUE × grid intensity for carbon).
    """
    if duration_s <= 0:
        raise CostInputError("duration_s: must be positive")
    if accelerator_count < 1:
        raise CostInputError("accelerator_count: must be at least 1")
    if energy_j < 0:
        raise CostInputError("energy_j: negative energy")
    if tokens is not None and tokens <= 0:
        raise CostInputError("tokens: must be positive")
    if inferences is not None and inferences <= 0:
        raise CostInputError("inferences: must be positive")
    if tokens is None and inferences is None:
        raise CostInputError("inferences, tokens: one of them is needed")
    units, unit = (tokens, "token") if tokens is not None else (inferences, "inference")
    assert units is not None
    throughput = units / duration_s
    j_per_unit = energy_j / units
    seconds_1m = 1e6 / throughput
    capacity = capacity_cost(accelerator_seconds=seconds_1m * accelerator_count, rate=rate)
    footprint = energy_footprint(joules=j_per_unit * 1e6, electricity=electricity)
    energy = energy_cost(kwh=footprint.kwh, electricity=electricity)
    total = money_add(items=[capacity, energy]) if capacity.currency == energy.currency else None
    if total is None:
        raise MissingRateError(
            f"currency: capacity in {capacity.currency} and energy in {electricity.currency}; "
            "convert one with money_convert first"
        )
    j_inf = energy_j / inferences if inferences else None
    return BenchmarkCost(
        unit=unit,
        throughput_per_s=throughput,
        j_per_inference=j_inf,
        j_per_1k_inferences=j_inf * 1000 if j_inf is not None else None,
        j_per_token=energy_j / tokens if tokens else None,
        capacity_per_1m=capacity,
        energy_per_1m=energy,
        total_per_1m=total,
        carbon_g_per_1m=footprint.carbon_g,
        facility_kwh_per_1m=footprint.facility_kwh,
        sources=(rate.ref, electricity.ref),
        inputs={
            "duration_s": duration_s,
            "energy_j": energy_j,
            "inferences": inferences,
            "tokens": tokens,
            "accelerator_count": accelerator_count,
        },
    )


@dataclass(frozen=True)
class SteadyState:
    """ML.ENERGY's steady-state window of a run and its stability verdict.

    ``flags``: "short_steady_state" (< 20 s), "non_positive_energy" (J/token ≤ 0),
    "underfilled_batch" (mean batch / max batch < 0.85). ``stable`` is True with no flags.
    """

    start_s: float
    end_s: float
    duration_s: float
    tokens: float
    energy_j: float
    j_per_token: float | None
    mean_batch: float
    max_batch: int
    flags: tuple[str, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stable(self) -> bool:
        return not self.flags


def steady_state_window(
    *,
    requests: pd.DataFrame,
    max_batch: int,
    times_s: Sequence[float] | np.ndarray,
    energy_mj: Sequence[float | None] | np.ndarray | None = None,
    power_w: Sequence[float | None] | np.ndarray | None = None,
    max_gap_s: float = 60.0,
) -> SteadyState:
    """The steady state of a run of N requests at max batch B, and its energy per token.

    1. ``requests`` has one row per request: ``start_s`` (admitted), ``first_token_s``,
       ``finish_s`` and ``output_tokens``, on the same clock as ``times_s``.
    2. The window starts when B requests have their first token (the B-th earliest first token)
       and ends when N − B − 1 have finished (the (N − B − 1)-th earliest finish).
    3. Tokens in the window: each request's output tokens spread evenly over
       [first_token_s, finish_s], counted for the part inside the window (no per-token times).
    4. Mean batch: requests running ([start_s, finish_s]) integrated over the window / its length.
    5. Energy: :func:`energy_in_window` over the GPU's counter (or power) samples.
    Known limit: with N ≤ B + 1 there is no steady state, and the function says so.
    """
    needed = {"start_s", "first_token_s", "finish_s", "output_tokens"}
    missing = needed - set(requests.columns)
    if missing:
        raise CostInputError(f"requests: missing column(s) {', '.join(sorted(missing))}")
    if max_batch < 1:
        raise CostInputError("max_batch: must be at least 1")
    n = len(requests)
    if n - max_batch - 1 < 1:
        raise CostInputError(
            f"requests: {n} requests at max batch {max_batch} have no steady state (need more than B + 1)"
        )
    start = requests["start_s"].to_numpy(float)
    first = requests["first_token_s"].to_numpy(float)
    finish = requests["finish_s"].to_numpy(float)
    out_tokens = requests["output_tokens"].to_numpy(float)
    for name, arr in (("start_s", start), ("first_token_s", first), ("finish_s", finish)):
        if np.isnan(arr).any():
            raise CostInputError(f"requests.{name}: missing value in row {int(np.argmax(np.isnan(arr)))}")
    bad = np.flatnonzero((first < start) | (finish < first))
    if bad.size:
        raise CostInputError(f"requests: row {int(bad[0])} is not start_s <= first_token_s <= finish_s")
    w_start = float(np.sort(first)[max_batch - 1])
    w_end = float(np.sort(finish)[n - max_batch - 2])
    duration = w_end - w_start
    flags: list[str] = []
    tokens = 0.0
    energy_j = 0.0
    mean_batch = 0.0
    if duration > 0:
        span = finish - first
        overlap = np.clip(np.minimum(finish, w_end) - np.maximum(first, w_start), 0.0, None)
        share = np.where(span > 0, overlap / np.where(span > 0, span, 1.0), 0.0)
        # A request whose tokens all came at one instant counts wholly if that instant is inside.
        instant = (span == 0) & (first >= w_start) & (first <= w_end)
        tokens = float((out_tokens * np.where(instant, 1.0, share)).sum())
        running = np.clip(np.minimum(finish, w_end) - np.maximum(start, w_start), 0.0, None)
        mean_batch = float(running.sum() / duration)
        energy_j = energy_in_window(
            times_s=times_s,
            start_s=w_start,
            end_s=w_end,
            energy_mj=energy_mj,
            power_w=power_w,
            max_gap_s=max_gap_s,
        ).joules
    if duration < STEADY_STATE_MIN_S:
        flags.append("short_steady_state")
    j_per_token = energy_j / tokens if tokens > 0 else None
    if j_per_token is None or j_per_token <= 0:
        flags.append("non_positive_energy")
    if mean_batch / max_batch < MEAN_BATCH_RATIO_MIN:
        flags.append("underfilled_batch")
    return SteadyState(
        start_s=w_start,
        end_s=w_end,
        duration_s=duration,
        tokens=tokens,
        energy_j=energy_j,
        j_per_token=j_per_token,
        mean_batch=mean_batch,
        max_batch=max_batch,
        flags=tuple(flags),
        inputs={"requests": n, "max_batch": max_batch, "max_gap_s": max_gap_s},
    )


# ---------------------------------------------------------------------------------------------
# Training runs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingCost:
    """Time, energy and cost per iteration, per sample (and per token), and to train in all."""

    time_to_train_s: float
    energy_to_train_j: float
    cost_to_train: Money
    capacity_to_train: Money
    energy_cost_to_train: Money
    carbon_to_train_g: float
    per_iteration_s: float
    per_iteration_j: float
    per_iteration_cost: float
    per_sample_s: float
    per_sample_j: float
    per_sample_cost: float
    per_token_j: float | None
    per_token_cost: float | None
    accelerator_count: int
    sources: tuple[PriceRef, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)


def training_cost(
    *,
    duration_s: float,
    energy_j: float,
    iterations: int,
    samples: float,
    tokens: float | None = None,
    accelerator_count: int,
    rate: AcceleratorRate,
    electricity: ElectricityRate,
) -> TrainingCost:
    """Training run (to its target, MLPerf's time-to-train) of ``duration_s`` on
    ``accelerator_count`` accelerators: cost = capacity (count × seconds × price/h / 3600) +
    energy (kWh × PUE × price/kWh); per iteration, sample and token by division."""
    if duration_s <= 0 or iterations < 1 or samples <= 0:
        raise CostInputError("duration_s, iterations, samples: must be positive")
    if tokens is not None and tokens <= 0:
        raise CostInputError("tokens: must be positive")
    if accelerator_count < 1:
        raise CostInputError("accelerator_count: must be at least 1")
    if energy_j < 0:
        raise CostInputError("energy_j: negative energy")
    capacity = capacity_cost(accelerator_seconds=duration_s * accelerator_count, rate=rate)
    footprint = energy_footprint(joules=energy_j, electricity=electricity)
    energy = energy_cost(kwh=footprint.kwh, electricity=electricity)
    if capacity.currency != energy.currency:
        raise MissingRateError(
            f"currency: capacity in {capacity.currency} and energy in {energy.currency}; "
            "convert one with money_convert first"
        )
    total = money_add(items=[capacity, energy])
    return TrainingCost(
        time_to_train_s=duration_s,
        energy_to_train_j=energy_j,
        cost_to_train=total,
        capacity_to_train=capacity,
        energy_cost_to_train=energy,
        carbon_to_train_g=footprint.carbon_g,
        per_iteration_s=duration_s / iterations,
        per_iteration_j=energy_j / iterations,
        per_iteration_cost=total.amount / iterations,
        per_sample_s=duration_s / samples,
        per_sample_j=energy_j / samples,
        per_sample_cost=total.amount / samples,
        per_token_j=energy_j / tokens if tokens else None,
        per_token_cost=total.amount / tokens if tokens else None,
        accelerator_count=accelerator_count,
        sources=(rate.ref, electricity.ref),
        inputs={
            "duration_s": duration_s,
            "energy_j": energy_j,
            "iterations": iterations,
            "samples": samples,
            "tokens": tokens,
        },
    )
