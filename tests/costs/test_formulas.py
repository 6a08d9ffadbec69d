"""Hand-worked examples for the pure cost and energy formulas (accelboard/costs/formulas.py)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from accelboard.costs.formulas.benchmark import benchmark_cost, steady_state_window
from accelboard.costs.formulas.energy import (
    energy_cross_check,
    energy_footprint,
    energy_in_window,
    energy_measure,
)
from accelboard.costs.formulas.hours import accelerator_hours_from_rollups, accelerator_hours_from_samples
from accelboard.costs.formulas.money import capacity_cost, energy_cost, money_add, money_convert
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


# --- energy -------------------------------------------------------------------------------------


def test_it_sums_counter_deltas_in_millijoules():
    # 0 → 1,000,000 → 3,000,000 mJ: 3,000 J.
    energy = energy_measure(times_s=[0, 10, 20], energy_mj=[0, 1_000_000, 3_000_000])
    assert energy.method == "counter"
    assert energy.joules == pytest.approx(3000.0)
    assert energy.kwh == pytest.approx(3000.0 / 3.6e6)
    assert energy.segments == 1


def test_it_starts_a_new_segment_when_the_counter_resets():
    # 5,000 J, then a driver reload (counter back near zero), then 2,000 J more. The interval
    # across the reset is unknown energy: 7,000 J in two segments, never a negative delta.
    energy = energy_measure(
        times_s=[0, 10, 20, 30, 40],
        energy_mj=[10_000_000, 15_000_000, 500_000, 1_500_000, 2_500_000],
    )
    assert energy.joules == pytest.approx(7000.0)
    assert energy.segments == 2
    assert energy.gap_s == pytest.approx(10.0)


def test_it_skips_missing_counter_readings():
    energy = energy_measure(times_s=[0, 10, 20], energy_mj=[0, None, 2_000_000])
    assert energy.joules == pytest.approx(2000.0)


def test_it_integrates_power_by_trapezoid_when_there_is_no_counter():
    # 100 W → 300 W over 10 s = 2,000 J; 300 W → 300 W over 10 s = 3,000 J.
    energy = energy_measure(times_s=[0, 10, 20], energy_mj=[None, None, None], power_w=[100, 300, 300])
    assert energy.method == "power"
    assert energy.joules == pytest.approx(5000.0)


def test_it_leaves_power_gaps_out_of_energy():
    # 0–10 s at 200 W = 2,000 J; 10–130 s is a 120 s gap (> 60 s); 130–140 s at 200 W = 2,000 J.
    energy = energy_measure(times_s=[0, 10, 130, 140], power_w=[200, 200, 200, 200], max_gap_s=60)
    assert energy.joules == pytest.approx(4000.0)
    assert energy.gap_s == pytest.approx(120.0)
    assert energy.covered_s == pytest.approx(20.0)


def test_it_leaves_intervals_with_missing_power_out():
    energy = energy_measure(times_s=[0, 1, 2, 3], power_w=[100, None, 100, 100])
    assert energy.joules == pytest.approx(100.0)
    assert energy.gap_s == pytest.approx(2.0)


def test_it_interpolates_window_edges_on_the_counter():
    # Counter rises 1,000 J per 10 s; 5 s to 25 s is 2,000 J.
    energy = energy_in_window(times_s=[0, 10, 20, 30], energy_mj=[0, 1e6, 2e6, 3e6], start_s=5.0, end_s=25.0)
    assert energy.joules == pytest.approx(2000.0)


def test_it_refuses_bad_energy_input():
    with pytest.raises(CostInputError, match="times_s: not strictly increasing"):
        energy_measure(times_s=[0, 10, 5], power_w=[1, 1, 1])
    with pytest.raises(CostInputError, match="differ in length"):
        energy_measure(times_s=[0, 10], power_w=[1, 1, 1])
    with pytest.raises(CostInputError, match="neither an energy counter nor power"):
        energy_measure(times_s=[0, 10])
    with pytest.raises(CostInputError, match="power_w: negative"):
        energy_measure(times_s=[0, 10], power_w=[-1, 1])
    with pytest.raises(CostInputError, match="outside the samples' span"):
        energy_in_window(times_s=[0, 10], power_w=[1, 1], start_s=5, end_s=20)


def test_it_flags_counter_and_power_disagreeing_by_more_than_five_percent():
    # Counter: 1,000 J over 10 s. Power 106 W flat: 1,060 J, 6 % above: flagged; 104 W: 4 %, not.
    times, counter = [0, 10], [0, 1_000_000]
    high = energy_cross_check(times_s=times, energy_mj=counter, power_w=[106, 106])
    assert high.counter.joules == pytest.approx(1000.0)
    assert high.power.joules == pytest.approx(1060.0)
    assert high.relative_difference == pytest.approx(0.06)
    assert high.disagree
    assert not energy_cross_check(times_s=times, energy_mj=counter, power_w=[104, 104]).disagree
    # A counter stuck at one value while 300 W is drawn: never 0 J silently.
    stuck = energy_cross_check(times_s=times, energy_mj=[5, 5], power_w=[300, 300])
    assert stuck.relative_difference is None
    assert stuck.disagree


def test_it_computes_kwh_pue_and_carbon():
    # 36 MJ = 10 kWh; × PUE 1.58 = 15.8 kWh; × 475 g/kWh = 7,505 gCO2e.
    footprint = energy_footprint(joules=36_000_000, electricity=POWER)
    assert footprint.kwh == pytest.approx(10.0)
    assert footprint.facility_kwh == pytest.approx(15.8)
    assert footprint.carbon_g == pytest.approx(7505.0)
    assert footprint.sources == (GRID,)


# --- accelerator-hours and capacity cost ---------------------------------------------------------


def _eight_gpus_ten_hours(util: float) -> pd.DataFrame:
    # One sample a minute for 10 h (601 samples: 600 one-minute intervals) on each of 8 GPUs.
    times = pd.date_range("2025-05-01", periods=601, freq="60s", tz="UTC")
    return pd.DataFrame(
        [{"accelerator": f"GPU-{g}", "time": t, "gpu_util": util} for g in range(8) for t in times]
    )


def test_it_reproduces_eight_h100_for_ten_hours_at_sixty_percent():
    # 8×H100 at $98.32/h for 10 h at 60% utilisation: allocation 80 GPU-h, usage 48 GPU-h,
    # capacity 80 × 98.32 / 8 = $983.20 (allocation basis), 48 × 12.29 = $589.92 (usage basis).
    hours = accelerator_hours_from_samples(samples=_eight_gpus_ten_hours(60.0), max_gap_s=90)
    assert hours.allocation_h == pytest.approx(80.0)
    assert hours.usage_h == pytest.approx(48.0)
    assert hours.idle_h == 0.0
    assert len(hours.by_accelerator) == 8
    allocation = capacity_cost(accelerator_seconds=hours.allocation_h * 3600, rate=H100_AWS)
    usage = capacity_cost(accelerator_seconds=hours.usage_h * 3600, rate=H100_AWS)
    assert allocation.amount == Decimal("983.20")  # exact: money is Decimal
    assert usage.amount == Decimal("589.92")
    assert allocation.currency == "USD"
    assert allocation.sources == (P5,)
    assert allocation.inputs["price_per_accelerator_hour"] == Decimal("12.29")


def test_it_counts_idle_hours_below_ten_percent_and_skips_gaps():
    # One GPU: 0–60 s at 5% (idle), 60–120 s at 50%, then a 1 h gap, then 60 s at unknown util.
    t0 = pd.Timestamp("2025-05-01", tz="UTC")
    samples = pd.DataFrame(
        {
            "accelerator": ["g"] * 5,
            "time": [t0 + pd.Timedelta(seconds=s) for s in (0, 60, 120, 3720, 3780)],
            "gpu_util": [5.0, 50.0, 80.0, None, 30.0],
        }
    )
    hours = accelerator_hours_from_samples(samples=samples, max_gap_s=90)
    assert hours.allocation_h == pytest.approx(180 / 3600)
    assert hours.idle_h == pytest.approx(60 / 3600)
    assert hours.usage_h == pytest.approx((60 * 0.05 + 60 * 0.5) / 3600)
    assert hours.unknown_util_h == pytest.approx(60 / 3600)


def test_it_computes_hours_from_rollup_rows():
    # Three 1-hour buckets: 60% (0.6 h used), 5% (idle, 0.05 h used), 100% half covered.
    rollups = pd.DataFrame(
        {
            "accelerator": [1, 1, 2],
            "width_s": [3600, 3600, 3600],
            "gpu_util_avg": [60.0, 5.0, 100.0],
            "covered_s": [np.nan, np.nan, 1800.0],
        }
    )
    hours = accelerator_hours_from_rollups(rollups=rollups)
    assert hours.allocation_h == pytest.approx(2.5)
    assert hours.usage_h == pytest.approx(0.6 + 0.05 + 0.5)
    assert hours.idle_h == pytest.approx(1.0)
    by = hours.by_accelerator.set_index("accelerator")
    assert by.loc[2, "allocation_h"] == pytest.approx(0.5)


def test_it_refuses_bad_hours_input():
    with pytest.raises(CostInputError, match="missing column"):
        accelerator_hours_from_samples(samples=pd.DataFrame({"time": [0]}))
    with pytest.raises(CostInputError, match="outside 0-100"):
        accelerator_hours_from_rollups(
            rollups=pd.DataFrame({"accelerator": [1], "width_s": [60], "gpu_util_avg": [140.0]})
        )


def test_it_computes_energy_cost_with_pue():
    # 100 kWh × 1.58 × $0.10 = $15.80.
    cost = energy_cost(kwh=100.0, electricity=POWER)
    assert cost.amount == Decimal("15.80")
    assert cost.sources == (GRID,)


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


def test_it_refuses_to_add_mixed_currencies():
    with pytest.raises(CostInputError, match="cannot add EUR, USD"):
        money_add(items=[Money(amount=Decimal(1), currency="USD"), Money(amount=Decimal(1), currency="EUR")])


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
    with pytest.raises(CostInputError, match="pue"):
        energy_cost(
            kwh=1,
            electricity=ElectricityRate(
                price_per_kwh=Decimal("0.1"), currency="USD", pue=0.9, carbon_g_per_kwh=1, ref=GRID
            ),
        )


# --- steady state -------------------------------------------------------------------------------


def _requests(n: int, *, stagger_s: float, length_s: float, tokens: int) -> pd.DataFrame:
    # Request i is admitted at i × stagger, gets its first token at once (prefill folded into the
    # admission instant) and finishes length_s later.
    start = np.arange(n) * stagger_s
    return pd.DataFrame(
        {
            "start_s": start,
            "first_token_s": start,
            "finish_s": start + length_s,
            "output_tokens": tokens,
        }
    )


def test_it_windows_the_steady_state_and_finds_it_stable():
    # 20 requests at B = 4: one admitted every 2 s, each decoding 800 tokens over 8 s
    # (100 tok/s), so exactly 4 run at any time once the batch is full.
    # Window: 4th first token = 3 × 2 = 6 s; N − B − 1 = 15th finish = 14 × 2 + 8 = 36 s: 30 s.
    # Tokens: 4 × 100 tok/s × 30 s = 12,000. Power 400 W flat → 12,000 J → 1.0 J/token.
    reqs = _requests(20, stagger_s=2.0, length_s=8.0, tokens=800)
    times = np.arange(0.0, 50.0, 0.5)
    window = steady_state_window(
        requests=reqs, max_batch=4, times_s=times, power_w=np.full(times.size, 400.0)
    )
    assert (window.start_s, window.end_s) == (6.0, 36.0)
    assert window.duration_s == pytest.approx(30.0)
    assert window.tokens == pytest.approx(12_000.0)
    assert window.energy_j == pytest.approx(12_000.0)
    assert window.j_per_token == pytest.approx(1.0)
    assert window.mean_batch == pytest.approx(4.0)
    assert window.flags == ()
    assert window.stable


def test_it_flags_a_short_steady_state_and_an_underfilled_batch():
    # Same requests but B = 8 while only 4 ever run at once: window from the 8th first token
    # (14 s) to the N − B − 1 = 11th finish (28 s) is 14 s (< 20 s), and the mean batch
    # 4 / 8 = 0.5 (< 0.85).
    reqs = _requests(20, stagger_s=2.0, length_s=8.0, tokens=800)
    times = np.arange(0.0, 50.0, 0.5)
    window = steady_state_window(
        requests=reqs, max_batch=8, times_s=times, power_w=np.full(times.size, 400.0)
    )
    assert (window.start_s, window.end_s) == (14.0, 28.0)
    assert window.mean_batch == pytest.approx(4.0)
    assert window.flags == ("short_steady_state", "underfilled_batch")
    assert not window.stable


def test_it_flags_zero_energy_per_token():
    # A counter that never moves while tokens are produced: J/token = 0 is not a measurement.
    reqs = _requests(20, stagger_s=2.0, length_s=8.0, tokens=700)
    times = np.arange(0.0, 50.0, 0.5)
    window = steady_state_window(
        requests=reqs, max_batch=4, times_s=times, energy_mj=np.full(times.size, 5e6)
    )
    assert window.energy_j == 0.0
    assert window.flags == ("non_positive_energy",)


def test_it_refuses_runs_without_a_steady_state():
    reqs = _requests(5, stagger_s=2.0, length_s=8.0, tokens=10)
    with pytest.raises(CostInputError, match="no steady state"):
        steady_state_window(requests=reqs, max_batch=4, times_s=[0, 100], power_w=[1, 1])
    bad = _requests(10, stagger_s=2.0, length_s=8.0, tokens=10)
    bad.loc[3, "finish_s"] = 0.0
    with pytest.raises(CostInputError, match="row 3 is not start_s"):
        steady_state_window(requests=bad, max_batch=2, times_s=[0, 100], power_w=[1, 1])


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
    one = ElectricityRate(price_per_kwh=Decimal("0.1"), currency="USD", pue=1.0, carbon_g_per_kwh=0, ref=GRID)
    parts = [energy_cost(kwh=1.0, electricity=one) for _ in range(3)]
    # Floats would give 0.30000000000000004; Decimal money sums exactly.
    assert money_add(items=parts).amount == Decimal("0.3")
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
