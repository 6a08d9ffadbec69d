"""Per-unit energy, cost and carbon of a benchmark run; ML.ENERGY steady-state window and flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .energy import energy_footprint, energy_in_window
from .money import capacity_cost, energy_cost, money_add
from .types import (
    MEAN_BATCH_RATIO_MIN,
    STEADY_STATE_MIN_S,
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    MissingRateError,
    Money,
    PriceRef,
)

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
