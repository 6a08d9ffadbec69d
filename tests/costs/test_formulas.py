"""Hand-worked examples for the pure cost formulas (accelboard/costs/formulas/)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from accelboard.costs.formulas.benchmark import benchmark_cost
from accelboard.costs.formulas.money import money_convert
from accelboard.costs.formulas.training import training_cost
from accelboard.costs.formulas.types import (
    AcceleratorRate,
    CostInputError,
    ElectricityRate,
    ExchangeRate,
    MissingRateError,
    Money,
    PriceRef,
)

P5 = PriceRef(
    kind="accelerator_price", id=11, source="skypilot-catalog aws/vms.csv", fetched_on=date(2025, 5, 1)
)
LAMBDA = PriceRef(kind="accelerator_price", id=12, source="lambda.ai/pricing", fetched_on=date(2025, 5, 1))
GRID = PriceRef(kind="electricity_price", id=7, source="EIA industrial average", fetched_on=date(2025, 5, 1))
# AWS p5.48xlarge: 8×H100 at $98.32/h → $12.29 per GPU-hour.
H100_AWS = AcceleratorRate(price_per_accelerator_hour=Decimal("98.32") / 8, currency="USD", ref=P5)
H100_LAMBDA = AcceleratorRate(price_per_accelerator_hour=Decimal("3.29"), currency="USD", ref=LAMBDA)
POWER = ElectricityRate(
    price_per_kwh=Decimal("0.10"), currency="USD", pue=1.58, carbon_g_per_kwh=475.0, ref=GRID
)


# --- currency -----------------------------------------------------------------------------------


def test_it_converts_currency_only_with_a_given_rate():
    eur = PriceRef(kind="exchange_rate", id=3, source="ECB 2025-05-01")
    rate = ExchangeRate(from_currency="USD", to_currency="EUR", rate=Decimal("0.88"), ref=eur)
    usd = Money(amount=Decimal(100), currency="USD", sources=(P5,))
    converted = money_convert(money=usd, to_currency="EUR", rates=[rate])
    assert converted.amount == Decimal("88.00")
    assert converted.sources == (P5, eur)
    back = money_convert(money=converted, to_currency="USD", rates=[rate])
    assert back.amount == pytest.approx(Decimal(100))
    with pytest.raises(MissingRateError, match="no exchange rate from USD to GBP"):
        money_convert(money=usd, to_currency="GBP", rates=[rate])


# --- benchmark runs -----------------------------------------------------------------------------


def test_it_reproduces_the_design_reference_for_one_h100():
    # A reference case: one H100 at 560 W, 4,890 tok/s, $0.10/kWh, PUE 1.58: 0.114519 J/token
    # (560 / 4,890). 1M tokens take 1e6 / 4,890 = 204.4990 s → 114,519.4 J = 0.0318109 kWh at
    # the GPU, × 1.58 = 0.0502612 kWh → electricity $0.00502612 per 1M tokens (≈ $0.005), carbon
    # 0.0502612 × 475 = 23.874 gCO2e. Capacity at Lambda's $3.29/h: 204.4990 × 3.29 / 3600 =
    # $0.186890; at AWS's $12.29 per GPU-hour: $0.698137 (DESIGN's "$0.19–0.70").
    cost = benchmark_cost(
        throughput=4890.0,
        accelerator_count=1,
        energy_per_unit_j=56_000.0 / 489_000,
        rate=H100_LAMBDA,
        electricity=POWER,
    )
    assert cost.energy_per_unit_j == pytest.approx(0.1145194, rel=1e-6)
    assert float(cost.energy_cost_per_1m) == pytest.approx(0.00502612, rel=1e-5)
    assert cost.carbon_g_per_1m == pytest.approx(23.8741, rel=1e-4)
    assert float(cost.capacity_per_1m) == pytest.approx(0.186890, rel=1e-5)
    assert cost.total_per_1m == cost.capacity_per_1m + cost.energy_cost_per_1m
    assert (cost.currency, cost.flags) == ("USD", ())
    aws = benchmark_cost(
        throughput=4890.0,
        accelerator_count=1,
        energy_per_unit_j=56_000.0 / 489_000,
        rate=H100_AWS,
        electricity=POWER,
    )
    assert float(aws.capacity_per_1m) == pytest.approx(0.698137, rel=1e-5)


def test_it_reproduces_the_measured_joules_per_token_reference():
    # ML.ENERGY's measurement: 0.0935 J/token → 93,500 J per 1M tokens = 0.0259722 kWh,
    # × 1.58 × $0.10 = $0.00410361 per 1M tokens (DESIGN's "about $0.004").
    cost = benchmark_cost(
        throughput=4890.0, accelerator_count=1, energy_per_unit_j=0.0935, rate=H100_LAMBDA, electricity=POWER
    )
    assert float(cost.energy_cost_per_1m) == pytest.approx(0.00410361, rel=1e-5)


def test_it_costs_per_million_inferences_on_several_accelerators():
    # 8 GPUs, 200 inferences/s at 4 J each. 1M inferences take 5,000 s × 8 GPUs = 40,000 GPU-s
    # × $12.29 / 3600 = $136.5556; energy 4e6 J = 1.11111 kWh × 1.58 × 0.10 = $0.175556.
    cost = benchmark_cost(
        throughput=200.0, accelerator_count=8, energy_per_unit_j=4.0, rate=H100_AWS, electricity=POWER
    )
    assert float(cost.capacity_per_1m) == pytest.approx(136.5556, rel=1e-5)
    assert float(cost.energy_cost_per_1m) == pytest.approx(0.175556, rel=1e-5)


def test_it_prices_no_energy_in_another_currency_and_guesses_no_missing_price():
    eur_power = ElectricityRate(
        price_per_kwh=Decimal("0.2"), currency="EUR", pue=1.2, carbon_g_per_kwh=300, ref=GRID
    )
    mixed = benchmark_cost(
        throughput=1, accelerator_count=1, energy_per_unit_j=1, rate=H100_AWS, electricity=eur_power
    )
    assert (mixed.energy_cost_per_1m, mixed.total_per_1m, mixed.flags) == (None, None, ("no-exchange-rate",))
    assert mixed.carbon_g_per_1m == pytest.approx(1e6 / 3.6e6 * 1.2 * 300)
    unpriced = benchmark_cost(
        throughput=1, accelerator_count=1, energy_per_unit_j=1, rate=None, electricity=None
    )
    assert (unpriced.capacity_per_1m, unpriced.total_per_1m, unpriced.carbon_g_per_1m) == (None, None, None)
    assert unpriced.flags == ("no-accelerator-price", "no-electricity-row")


def test_it_refuses_bad_run_input():
    with pytest.raises(CostInputError, match="throughput"):
        benchmark_cost(
            throughput=0, accelerator_count=1, energy_per_unit_j=1, rate=H100_AWS, electricity=POWER
        )


# --- training -----------------------------------------------------------------------------------


def test_it_costs_a_training_run_to_its_target():
    # 8×H100 for 2 h to target, 1,000 iterations of 256 samples (256,000); 8 × 600 W × 7,200 s =
    # 34,560,000 J = 9.6 kWh. Capacity 16 GPU-h × $12.29 = $196.64; energy 9.6 × 1.58 × 0.10 =
    # $1.5168; total $198.1568. Per iteration 7.2 s, 34,560 J, $0.1981568; per sample 0.028125 s,
    # 135 J.
    result = training_cost(
        duration_s=7200,
        energy_j=34_560_000,
        iterations=1000,
        samples=256_000,
        accelerator_count=8,
        rate=H100_AWS,
        electricity=POWER,
    )
    assert result["cost_to_train"] == 198.1568 and result["currency"] == "USD"
    assert result["energy_to_train_j"] == 34_560_000
    assert result["per_iteration_s"] == pytest.approx(7.2)
    assert result["per_iteration_j"] == pytest.approx(34_560.0)
    assert result["per_iteration_cost"] == pytest.approx(0.1981568)
    assert result["per_sample_s"] == pytest.approx(0.028125)
    assert result["per_sample_j"] == pytest.approx(135.0)
    # Without a price there is no cost, but time and energy per sample still are.
    unpriced = training_cost(
        duration_s=7200,
        energy_j=34_560_000,
        iterations=None,
        samples=256_000,
        accelerator_count=8,
        rate=None,
        electricity=None,
    )
    assert "cost_to_train" not in unpriced and unpriced["per_sample_j"] == pytest.approx(135.0)


# --- the rounding rule of money ----------------------------------------------------------------


def test_it_keeps_money_exact_until_it_is_stored() -> None:
    from accelboard.costs.formulas.money import as_decimal

    # A quantity enters a money product in its shortest decimal form: 0.1 is 0.1.
    assert as_decimal(0.1) == Decimal("0.1") and as_decimal(3) == Decimal(3)
    parts = [as_decimal(1.0) * Decimal("0.1") for _ in range(3)]  # 1 kWh at $0.10, three times
    # Floats would give 0.30000000000000004; Decimal money sums exactly.
    assert sum(parts, Decimal(0)) == Decimal("0.3")
    assert sum(0.1 for _ in range(3)) != 0.3


@pytest.mark.parametrize(
    ("amount", "places", "stored"),
    [
        ("0.00005", "0.0001", "0.0000"),  # half to even: down to the even 0
        ("0.00015", "0.0001", "0.0002"),  # half to even: up to the even 2
        ("0.00025", "0.0001", "0.0002"),
        ("12.2900004", "0.000001", "12.290000"),  # a per-hour rate keeps 6 places
        ("-1.23455", "0.0001", "-1.2346"),
    ],
)
def test_it_rounds_money_once_half_to_even(amount: str, places: str, stored: str) -> None:
    from accelboard.costs.formulas.money import money_round

    assert money_round(Decimal(amount), Decimal(places)) == Decimal(stored)
    assert str(money_round(Decimal(amount), Decimal(places))) == stored
    assert money_round(None) is None
