"""What each part of a profile costs: GPU time is what is paid for, so a category costs its share
of GPU time; the parts that are waste or have a cheaper form are the saving candidates. Pure.
"""

from __future__ import annotations

import math
from typing import Any

from accelboard.core.numbers import sig

from . import categories as cats


def cost_shares(
    summary: dict[str, Any], *, cost: float | None, currency: str, per: str
) -> dict[str, Any] | None:
    """Each category's share of a cost (``cost`` ``currency`` ``per``, e.g. 0.04 USD per 1M tokens):
    GPU time is what is paid for, so a category costs its share of GPU time. The saving
    candidates are the parts that are waste or have a known cheaper form, largest first."""
    if cost is None or not math.isfinite(cost) or cost <= 0:
        return None
    totals = summary["totals"]
    shares = totals["shares"]
    rows = [
        {"category": key, "label": cats.LABELS[key], "share": share, "cost": share * cost}
        for key, share in shares.items()
        if share
    ]
    rows.sort(key=lambda row: -row["cost"])
    candidates = []
    if shares.get(cats.IDLE):
        candidates.append(
            {
                "what": "idle GPU time",
                "share": shares[cats.IDLE],
                "cost": shares[cats.IDLE] * cost,
                "how": "feed the GPU faster (input pipeline, CUDA graphs, fewer synchronisations)",
            }
        )
    if shares.get("communication"):
        candidates.append(
            {
                "what": "exposed communication",
                "share": shares["communication"],
                "cost": shares["communication"] * cost,
                "how": "overlap collectives with compute",
            }
        )
    copies = sum(shares.get(k) or 0.0 for k in cats.MEMORY)
    if copies:
        candidates.append(
            {
                "what": "memory copies and memsets",
                "share": copies,
                "cost": copies * cost,
                "how": "keep data on the device; pinned, asynchronous copies",
            }
        )
    precision = summary["precision"]
    base = totals.get("base_us") or 0.0
    fp32_us = precision["by_precision"].get("fp32", 0.0)
    if precision["hint"] and base:
        # Upper bound: the fp32 matrix work, were it free; bf16 tensor cores recover most of it.
        share = fp32_us / base
        candidates.append(
            {
                "what": "fp32 matrix multiplies",
                "share": share,
                "cost": share * cost,
                "how": "bf16/fp16 autocast or TF32",
            }
        )
    candidates.sort(key=lambda row: -row["cost"])
    return {"currency": currency, "per": per, "cost": cost, "rows": rows, "candidates": candidates}


def headline_costs(costs: dict[str, Any] | None) -> list[str]:
    """Sentences for the cost card: "idle GPU time is 31% of this run's cost: 0.012 USD per 1M tokens"."""
    if not costs:
        return []
    return [
        f"{row['what'][:1].upper()}{row['what'][1:]} is {row['share']:.{0 if row['share'] >= 0.095 else 1}%} of this run's cost: "
        f"{sig(row['cost'], digits=4)} {costs['currency']} {costs['per']}"
        for row in costs["candidates"]
    ]
