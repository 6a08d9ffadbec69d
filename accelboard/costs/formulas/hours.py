"""Accelerator-hours: allocation (held), usage (utilisation-weighted) and idle (< 10 %)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .types import (
    IDLE_UTIL_BELOW_PCT,
    AcceleratorHours,
    CostInputError,
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
