"""Per-unit cost and carbon of a benchmark run (what ``RunCost`` stores); ML.ENERGY's steady-state window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from .energy import energy_in_window
from .money import as_decimal
from .types import (
    J_PER_KWH,
    MEAN_BATCH_RATIO_MIN,
    STEADY_STATE_MIN_S,
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
)

# Benchmark runs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkCost:
    """Per-1M-unit capacity, energy cost and carbon of one benchmark run, as far as its prices
    go: a figure whose price is missing is None and a flag says why (never guessed).

    ``flags``: "no-accelerator-price" (no capacity, no total), "no-electricity-row" (energy
    known, no electricity or carbon row), "no-exchange-rate" (energy priced in another currency
    than capacity: no energy cost, no total)."""

    energy_per_unit_j: float | None
    capacity_per_1m: Decimal | None
    energy_cost_per_1m: Decimal | None
    total_per_1m: Decimal | None
    carbon_g_per_1m: float | None
    currency: str
    flags: tuple[str, ...] = field(default=())


def benchmark_cost(
    *,
    throughput: float,
    accelerator_count: int,
    energy_per_unit_j: float | None,
    rate: AcceleratorRate | None,
    electricity: ElectricityRate | None,
) -> BenchmarkCost:
    """Per-1M-unit cost of a run doing ``throughput`` units (tokens, samples or inferences) per
    second on ``accelerator_count`` accelerators at ``energy_per_unit_j`` J per unit.

    1. Capacity: 1M units take 1e6 / throughput seconds of every accelerator: × count × price
       per accelerator-hour / 3600.
    2. Energy: J per unit × 1e6 / 3.6e6 = kWh at the device; × PUE = facility kWh; × price per
       kWh for money (only in the capacity's currency), × the grid's g/kWh for carbon.
    3. Total = capacity + energy cost (capacity alone where energy is unknown).
    Money stays unrounded ``Decimal`` (rule 3 of :mod:`.money`: rounded where it is stored).
    """
    if throughput <= 0 or accelerator_count < 1:
        raise CostInputError("throughput, accelerator_count: must be positive")
    flags: list[str] = []
    capacity: Decimal | None = None
    currency = ""
    if rate is None:
        flags.append("no-accelerator-price")
    else:
        seconds_per_1m = as_decimal(1e6 / throughput)
        capacity = seconds_per_1m * accelerator_count * rate.price_per_accelerator_hour / 3600
        currency = rate.currency
    energy: Decimal | None = None
    carbon = None
    if energy_per_unit_j is not None and electricity is not None:
        facility_kwh = energy_per_unit_j * 1e6 / J_PER_KWH * electricity.pue
        carbon = facility_kwh * electricity.carbon_g_per_kwh
        if electricity.currency and (not currency or electricity.currency == currency):
            energy = as_decimal(facility_kwh) * electricity.price_per_kwh
            currency = currency or electricity.currency
        elif electricity.currency:
            flags.append("no-exchange-rate")
    elif energy_per_unit_j is not None:
        flags.append("no-electricity-row")
    total = None
    if capacity is not None:
        total = capacity + (energy or Decimal(0)) if "no-exchange-rate" not in flags else None
    return BenchmarkCost(
        energy_per_unit_j=energy_per_unit_j,
        capacity_per_1m=capacity,
        energy_cost_per_1m=energy,
        total_per_1m=total,
        carbon_g_per_1m=carbon,
        currency=currency,
        flags=tuple(flags),
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
