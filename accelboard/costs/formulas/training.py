"""Training runs: time, energy and cost per iteration/sample/token and to train to target."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .energy import energy_footprint
from .money import as_decimal, capacity_cost, energy_cost, money_add
from .types import (
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    MissingRateError,
    Money,
    PriceRef,
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
    per_iteration_cost: Decimal
    per_sample_s: float
    per_sample_j: float
    per_sample_cost: Decimal
    per_token_j: float | None
    per_token_cost: Decimal | None
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
        per_iteration_cost=total.amount / as_decimal(iterations),
        per_sample_s=duration_s / samples,
        per_sample_j=energy_j / samples,
        per_sample_cost=total.amount / as_decimal(samples),
        per_token_j=energy_j / tokens if tokens else None,
        per_token_cost=total.amount / as_decimal(tokens) if tokens else None,
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
