"""Training runs: time, energy and cost to train to target, and per iteration and per sample."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .money import RATE_PLACES, as_decimal, money_round
from .types import J_PER_KWH, AcceleratorRate, ElectricityRate


def training_cost(
    *,
    duration_s: float,
    energy_j: float | None,
    samples: float | None,
    iterations: float | None,
    accelerator_count: int,
    rate: AcceleratorRate | None,
    electricity: ElectricityRate | None,
) -> dict[str, Any]:
    """A training run (to its target, MLPerf's time-to-train) of ``duration_s`` on
    ``accelerator_count`` accelerators, as far as its inputs go (what ``RunCost.training`` holds).

    1. Capacity = count × seconds × price per accelerator-hour / 3600; energy cost = J / 3.6e6 ×
       PUE × price per kWh, only in the capacity's currency; ``cost_to_train`` is their sum,
       rounded to 6 places (a JSON number: JSON holds no Decimal), present only with a price;
       its two parts are kept apart (``capacity_cost_to_train``, ``energy_cost_to_train``, the
       latter only where energy was measured and priced), each rounded the same way, so that the
       page can show what the GPUs' time cost and what the electricity did.
    2. Per sample and per iteration: seconds, joules and cost by division, where counted.
    """
    out: dict[str, Any] = {"time_to_train_s": duration_s, "accelerator_count": accelerator_count}
    capacity = (
        rate.price_per_accelerator_hour * accelerator_count * as_decimal(duration_s) / 3600 if rate else None
    )
    energy_cost: Decimal | None = None
    if energy_j is not None:
        out["energy_to_train_j"] = energy_j
        if (
            electricity is not None
            and electricity.currency
            and (rate is None or electricity.currency == rate.currency)
        ):
            energy_cost = as_decimal(energy_j / J_PER_KWH * electricity.pue) * electricity.price_per_kwh
    if capacity is not None:
        out["cost_to_train"] = float(money_round(capacity + (energy_cost or Decimal(0)), RATE_PLACES) or 0)
        out["capacity_cost_to_train"] = float(money_round(capacity, RATE_PLACES) or 0)
        if energy_cost is not None:
            out["energy_cost_to_train"] = float(money_round(energy_cost, RATE_PLACES) or 0)
        out["currency"] = rate.currency if rate else ""
    for name, count in (("sample", samples), ("iteration", iterations)):
        if count:
            out[f"per_{name}_s"] = duration_s / count
            if energy_j is not None:
                out[f"per_{name}_j"] = energy_j / count
            if "cost_to_train" in out:
                out[f"per_{name}_cost"] = out["cost_to_train"] / count
    return out
