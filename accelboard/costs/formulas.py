"""Cost, energy and carbon formulas: pure functions on plain data, numpy and pandas (no Django).

Units follow ``shared/DESIGN.md``: time in seconds (hours where named ``_h``), power W, energy J
(kWh where named ``_kwh``), energy counters mJ, money as a float amount with an ISO currency code,
carbon gCO2e. Money is computed in floats; whoever stores it rounds it to a decimal.

Every result carries what it was computed from: ``inputs`` (the numbers used) and ``sources``
(the price rows, electricity rows and exchange rates passed in, as :class:`PriceRef`), so that a
report can cite each figure's inputs. Nothing here guesses a price, a PUE or an exchange rate:
they are arguments, and a missing exchange rate raises :class:`MissingRateError`.

The formulas live in sub-domain modules (``types``, ``energy``, ``hours``, ``money``,
``benchmark_cost``, ``training``); this module re-exports them so callers can import one name.
"""

from __future__ import annotations

from .benchmark_cost import (
    BenchmarkCost,
    SteadyState,
    benchmark_cost,
    steady_state_window,
)
from .energy import (
    EnergyCrossCheck,
    energy_cross_check,
    energy_footprint,
    energy_in_window,
    energy_measure,
)
from .hours import (
    accelerator_hours_from_rollups,
    accelerator_hours_from_samples,
)
from .money import (
    capacity_cost,
    energy_cost,
    money_add,
    money_convert,
)
from .training import (
    TrainingCost,
    training_cost,
)
from .types import (
    IDLE_UTIL_BELOW_PCT,
    J_PER_KWH,
    MEAN_BATCH_RATIO_MIN,
    STEADY_STATE_MIN_S,
    AcceleratorHours,
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    Energy,
    EnergyFootprint,
    ExchangeRate,
    MissingRateError,
    Money,
    PriceRef,
)

__all__ = [
    "AcceleratorHours",
    "AcceleratorRate",
    "BenchmarkCost",
    "CostInputError",
    "ElectricityRate",
    "Energy",
    "EnergyCrossCheck",
    "EnergyFootprint",
    "ExchangeRate",
    "IDLE_UTIL_BELOW_PCT",
    "J_PER_KWH",
    "MEAN_BATCH_RATIO_MIN",
    "MissingRateError",
    "Money",
    "PriceRef",
    "STEADY_STATE_MIN_S",
    "SteadyState",
    "TrainingCost",
    "accelerator_hours_from_rollups",
    "accelerator_hours_from_samples",
    "benchmark_cost",
    "capacity_cost",
    "energy_cost",
    "energy_cross_check",
    "energy_footprint",
    "energy_in_window",
    "energy_measure",
    "money_add",
    "money_convert",
    "steady_state_window",
    "training_cost",
]
