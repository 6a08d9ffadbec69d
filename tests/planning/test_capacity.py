"""Capacity plan maths, worked by hand: traffic shape (mixed lengths, daily peaks, growth),
operating point at the objective, replicas with headroom and N+1, instance packing, monthly
capacity/energy/carbon, cost per 1M at real utilisation, ranking and sensitivity.

Every expected figure below is written as the arithmetic a person would do on paper, with the
intermediate results in comments, so that a change in the module's formulas shows as a failure
here rather than as a silently different page."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from accelboard.benchmarks.configurations import ConfigPoint
from accelboard.costs.formulas.money import as_decimal
from accelboard.costs.formulas.types import AcceleratorRate, ElectricityRate, ExchangeRate, PriceRef
from accelboard.costs.gaps import cost_gap
from accelboard.planning import capacity as c
from accelboard.planning import plan_inputs as pi

DAY0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
HOUR = 3600


def _bucket(at: datetime, *, rps: float, prompt: float, output: float, width: int = HOUR) -> pi.TrafficBucket:
    requests = round(rps * width)
    return pi.TrafficBucket(
        start=at,
        width_s=width,
        requests=requests,
        prompt_tokens=round(requests * prompt),
        generated_tokens=round(requests * output),
    )


def _point(**kwargs: Any) -> ConfigPoint:
    defaults: dict[str, Any] = {
        "variant": "fp8",
        "precision": "fp8",
        "accelerator": "H100 SXM 80GB",
        "accelerator_count": 1,
        "batch_size": 64,
        "concurrency": None,
        "framework": "vLLM",
        "accelerator_slug": "h100",
        "throughput": 1000.0,
        "throughput_unit": "tokens/s",
        "p50_ms": None,
        "p99_ms": 1000.0,
        "power_w": None,
        "energy_per_inference_j": None,
        "memory_peak_bytes": None,
        "memory_total_bytes": None,
        "capacity_cost_per_1m": None,
        "energy_cost_per_1m": None,
        "total_cost_per_1m": None,
        "currency": "",
        "cost_unit": "",
        "price_stale": False,
        "run_ids": (1, 2, 3, 4, 5),
        "scenario": "offline",
        "input_length": 1024,
        "output_length": 256,
    }
    defaults.update(kwargs)
    return ConfigPoint(**defaults)


def _price(
    *,
    per_gpu_hour: float,  # as a price book row says it: a Decimal of its shortest form
    instance_gpus: int = 1,
    currency: str = "USD",
    electricity: ElectricityRate | None = None,
    stale: bool = False,
) -> pi.OptionPrice:
    return pi.OptionPrice(
        rate=AcceleratorRate(
            price_per_accelerator_hour=as_decimal(per_gpu_hour),
            currency=currency,
            ref=PriceRef(
                kind="accelerator_price", id=1, source="test book", fetched_on=date(2026, 3, 1), stale=stale
            ),
        ),
        instance_gpus=instance_gpus,
        instance_price_per_hour=as_decimal(per_gpu_hour) * instance_gpus,
        provider="aws",
        region="us-east-1",
        instance_type="test.large",
        pricing_model="on-demand",
        electricity=electricity,
    )


ELECTRICITY = ElectricityRate(
    price_per_kwh=Decimal("0.10"),
    currency="USD",
    pue=1.5,
    carbon_g_per_kwh=400.0,
    ref=PriceRef(kind="electricity_price", id=2, source="test site"),
)


def _shape(buckets: list[pi.TrafficBucket], *, days: int = 1) -> pi.TrafficShape:
    return pi.traffic_shape_build(
        buckets=buckets, window_start=DAY0, window_end=DAY0 + timedelta(days=days), bucket_s=HOUR
    )


def _inputs(traffic: pi.TrafficShape, options: list[pi.ServingOption], **kwargs: Any) -> pi.PlanInputs:
    defaults: dict[str, Any] = {
        "traffic": traffic,
        "options": tuple(options),
        "objective": pi.Objective(e2e_p99_ms=5000.0),
        "assumptions": pi.Assumptions(
            growth_pct_per_month=0.0, horizon_months=0, headroom_pct=20.0, n_plus_one=True
        ),
        "currency": "USD",
    }
    defaults.update(kwargs)
    return pi.PlanInputs(**defaults)


# --- Hand-worked case 1: a mix of prompt and output lengths ------------------------------------

# Four hours of one day. Short chats (500 in / 200 out) at 10 req/s in the first hour; long
# documents (2000 in / 500 out) at 6 req/s in the second; 2 short req/s after that.
MIXED = [
    _bucket(DAY0, rps=10, prompt=500, output=200),  # 36 000 req, 7 200 000 out -> 2 000 tok/s
    _bucket(
        DAY0 + timedelta(hours=1), rps=6, prompt=2000, output=500
    ),  # 21 600 req, 10 800 000 out -> 3 000 tok/s
    _bucket(
        DAY0 + timedelta(hours=2), rps=2, prompt=500, output=200
    ),  # 7 200 req, 1 440 000 out -> 400 tok/s
    _bucket(DAY0 + timedelta(hours=3), rps=2, prompt=500, output=200),
]


def test_it_shapes_a_mix_of_lengths_on_its_token_peak_not_on_its_request_peak() -> None:
    shape = _shape(MIXED)
    # 72 000 requests, 68 400 000 prompt and 20 880 000 output tokens over 4 h = 14 400 s.
    assert shape.requests == 72_000
    assert shape.mean_rps == pytest.approx(72_000 / 14_400)  # 5 req/s
    assert shape.mean_output_tps == pytest.approx(20_880_000 / 14_400)  # 1 450 tok/s
    assert shape.prompt_per_request == pytest.approx(68_400_000 / 72_000)  # 950 tokens
    assert shape.output_per_request == pytest.approx(20_880_000 / 72_000)  # 290 tokens
    assert shape.peak_rps == pytest.approx(10.0)  # the first hour
    # The token peak is the second hour (6 req/s × 500), not the request peak × mean length
    # (10 × 290 = 2 900) nor the request peak's own tokens (10 × 200 = 2 000).
    assert shape.peak_output_tps == pytest.approx(3000.0)
    assert shape.peak_at == DAY0 + timedelta(hours=1)
    assert shape.peak_to_mean == pytest.approx(3000.0 / 1450.0)
    assert shape.coverage == pytest.approx(4 / 24)
    assert shape.growth_pct_per_month is None  # one day: no trend


def test_it_sizes_a_mixed_length_traffic_by_hand() -> None:
    option = pi.serving_options_build(
        points=[
            _point(batch_size=32, throughput=2500.0, p99_ms=3000.0, power_w=450.0),
            _point(batch_size=64, throughput=3500.0, p99_ms=4500.0, power_w=600.0),
        ]
    )[0]
    inputs = _inputs(
        _shape(MIXED),
        [option],
        prices={"h100": _price(per_gpu_hour=2.0, electricity=ELECTRICITY)},
        board_power_w={"h100": 700.0},
    )
    plan = c.plan_build(inputs)
    [sized] = plan.options
    assert sized.status == c.RANKED and sized.rank == 1
    # Both load levels meet p99 ≤ 5 000 ms: the higher one, 3 500 tok/s per replica.
    assert sized.point is not None and sized.point.batch_size == 64
    # Peak 3 000 tok/s × 1.2 headroom = 3 600 -> ceil(3600 / 3500) = 2 replicas (sizing on the
    # request peak × mean length, 2 900 × 1.2 = 3 480, would have said 1); N+1 -> 3.
    assert sized.replicas_at_peak == 2
    assert sized.replicas == 3 and sized.gpus == 3 and sized.instances == 3 and sized.billed_gpus == 3
    # Utilisation at mean: 1 450 / (3 × 3 500) = 0.138095...
    assert sized.utilisation_mean == pytest.approx(1450 / 10500)
    assert sized.utilisation_peak == pytest.approx(3000 / 10500)
    # Capacity: 3 instances × $2/h × 730 h = $4 380, exactly: money stays Decimal (the costs rule).
    assert isinstance(sized.capacity_monthly, Decimal) and sized.capacity_monthly == Decimal("4380")
    # Power: idle 15 % of 700 W = 105 W per GPU; per replica 105 + (600 − 105) × 0.138095 = 173.357 W;
    # 3 replicas = 520.071 W; × 730 h = 379.652 kWh; × PUE 1.5 = 569.478 kWh; × $0.10 = $56.948;
    # × 400 g/kWh = 227.791 kg.
    watts = 3 * (105 + (600 - 105) * (1450 / 10500))
    assert sized.device_kwh_monthly == pytest.approx(watts * 730 / 1000)
    assert sized.device_kwh_monthly == pytest.approx(379.652, abs=1e-3)
    assert sized.facility_kwh_monthly == pytest.approx(569.478, abs=1e-3)
    assert isinstance(sized.energy_monthly, Decimal)
    assert sized.energy_monthly == pytest.approx(Decimal("56.9478"), abs=Decimal("1e-4"))
    assert sized.carbon_kg_monthly == pytest.approx(227.791, abs=1e-3)
    assert sized.total_monthly == pytest.approx(Decimal("4380") + Decimal("56.9478"), abs=Decimal("1e-4"))
    # Output tokens a month at the mean: 1 450 × 730 × 3 600 = 3 810 600 000 -> $1.1644 per 1M,
    # against $0.1587 + energy per 1M on the benchmark at full load (2 / (3500 × 3600) × 1e6).
    assert float(sized.cost_per_1m) == pytest.approx((4380.0 + 56.9478) / 3810.6, abs=1e-6)
    energy_per_1m = 600 / 3500 * 1e6 / 3.6e6 * 1.5 * 0.10  # J/token -> kWh per 1M × PUE × price
    assert float(sized.benchmark_cost_per_1m) == pytest.approx(2 / (3500 * 3600) * 1e6 + energy_per_1m)
    # 950 / 1024 and 290 / 256 are within 25 %: no length warning.
    assert not any("Benchmarked at" in note for note in sized.notes)


def test_it_says_when_the_benchmark_lengths_are_far_from_the_production_mix() -> None:
    option = pi.serving_options_build(
        points=[_point(input_length=128, output_length=2048, throughput=3500.0)]
    )[0]
    plan = c.plan_build(_inputs(_shape(MIXED), [option], prices={"h100": _price(per_gpu_hour=2.0)}))
    [sized] = plan.options
    assert sized.ranked  # still sized, but not silently
    assert any("Benchmarked at 128 in / 2,048 out" in note and "950 / 290" in note for note in sized.notes)
    unknown = pi.serving_options_build(points=[_point(input_length=None, output_length=None)])[0]
    [sized] = c.plan_build(
        _inputs(_shape(MIXED), [unknown], prices={"h100": _price(per_gpu_hour=2.0)})
    ).options
    assert any("lengths unknown" in note for note in sized.notes)


# --- Hand-worked case 2: the cheapest per token on its benchmark fails p99 at peak ---------------

# Four hours at 10 000, 2 000, 2 000 and 6 000 output tok/s (250 out, 1 000 in per request): mean
# 5 000, peak 10 000. Objective p99 e2e ≤ 2 000 ms; no growth, no headroom, no spare replica.
PEAKY = [
    _bucket(DAY0 + timedelta(hours=i), rps=rps, prompt=1000, output=250)
    for i, rps in enumerate((40, 8, 8, 24))
]
H100_POINTS = [
    _point(variant="fp16", precision="fp16", batch_size=64, throughput=6000.0, p99_ms=1800.0),
    _point(variant="fp16", precision="fp16", batch_size=128, throughput=10000.0, p99_ms=3500.0),
]
L40S_POINTS = [
    _point(accelerator="L40S", accelerator_slug="l40s", batch_size=16, throughput=1000.0, p99_ms=1500.0),
    _point(accelerator="L40S", accelerator_slug="l40s", batch_size=64, throughput=5000.0, p99_ms=4000.0),
]


def _peaky_plan(**changes: Any) -> c.Plan:
    options = pi.serving_options_build(points=[*H100_POINTS, *L40S_POINTS])
    inputs = _inputs(
        _shape(PEAKY),
        options,
        objective=pi.Objective(e2e_p99_ms=2000.0),
        assumptions=pi.Assumptions(
            growth_pct_per_month=0.0, horizon_months=0, headroom_pct=0.0, n_plus_one=False
        ),
        prices={"h100": _price(per_gpu_hour=2.0), "l40s": _price(per_gpu_hour=0.9)},
    )
    return c.plan_build(replace(inputs, **changes))


def test_it_ranks_below_the_benchmark_cheapest_when_its_p99_fails_at_peak() -> None:
    plan = _peaky_plan()
    assert plan.traffic.mean_output_tps == pytest.approx(5000.0)
    assert plan.traffic.peak_output_tps == pytest.approx(10000.0)
    by_label = {o.option.label: o for o in plan.options}
    h100, l40s = by_label["fp16 on 1× H100 SXM 80GB"], by_label["fp8 on 1× L40S"]
    # On the benchmark alone, at full load and the highest throughput each measured:
    # L40S $0.9 / (5 000 × 3 600) × 1e6 = $0.0500 per 1M; H100 $2 / (10 000 × 3 600) × 1e6 = $0.0556.
    assert l40s.benchmark_cost_per_1m == Decimal("0.05")
    assert float(h100.benchmark_cost_per_1m) == pytest.approx(2 / 36000 * 1e6 / 1000)
    assert plan.benchmark_cheapest is l40s
    # At p99 ≤ 2 000 ms the L40S only sustains batch 16 (1 000 tok/s): 10 000 / 1 000 = 10 replicas,
    # 10 × $0.9 × 730 = $6 570 a month. The H100 sustains batch 64 (6 000 tok/s): ceil(10 000 / 6 000)
    # = 2 replicas, 2 × $2 × 730 = $2 920 a month.
    assert l40s.point is not None and l40s.point.batch_size == 16
    assert (l40s.replicas, l40s.total_monthly) == (10, Decimal("6570"))
    assert h100.point is not None and h100.point.batch_size == 64
    assert (h100.replicas, h100.total_monthly) == (2, Decimal("2920"))
    assert [o.option.label for o in plan.ranked] == ["fp16 on 1× H100 SXM 80GB", "fp8 on 1× L40S"]
    assert plan.best is h100
    # Real cost per 1M: 5 000 tok/s × 730 h × 3 600 s = 13 140 M tokens -> $0.2222 and $0.5000.
    assert float(h100.cost_per_1m) == pytest.approx(2920.0 / 13140.0)
    assert l40s.cost_per_1m == Decimal("0.5")
    assert any("misses p99 e2e ≤ 2,000 ms" in note for note in l40s.notes)
    headline = plan.headline()
    assert headline.startswith("fp16 on 1× H100 SXM 80GB serves the planned peak of 10,000 output tokens/s")
    assert (
        "fp8 on 1× L40S is cheaper per token on its benchmark (0.05 against 0.05556 USD per 1M)" in headline
    )
    assert "costs 6,570 USD a month at the objective" in headline


def test_it_lets_the_benchmark_cheapest_win_when_the_objective_allows_its_full_load() -> None:
    plan = _peaky_plan(objective=pi.Objective(e2e_p99_ms=4000.0))
    # Both reach their highest point: L40S 10 000 / 5 000 = 2 × $0.9 × 730 = $1 314; H100 1 × $2 × 730.
    assert plan.best is not None and plan.best.option.label == "fp8 on 1× L40S"
    assert plan.best.total_monthly == Decimal("1314")


def test_it_adds_a_spare_replica_and_headroom_and_growth() -> None:
    plan = _peaky_plan(
        assumptions=pi.Assumptions(
            growth_pct_per_month=10.0, horizon_months=2, headroom_pct=25.0, n_plus_one=True
        )
    )
    h100 = next(o for o in plan.options if o.option.accelerator_slug == "h100")
    # 10 000 × 1.1² = 12 100 tok/s at peak; × 1.25 = 15 125; / 6 000 = 2.52 -> 3 replicas, + 1 spare.
    assert plan.demand_peak_tps == pytest.approx(12100.0)
    assert plan.sized_tps == pytest.approx(15125.0)
    assert (h100.replicas_at_peak, h100.replicas, h100.gpus) == (3, 4, 4)
    assert h100.utilisation_mean == pytest.approx(5000 * 1.21 / (4 * 6000))


# --- Statuses and thin data ----------------------------------------------------------------------


def test_it_lists_an_option_that_misses_or_does_not_measure_the_objective_without_ranking_it() -> None:
    plan = _peaky_plan(objective=pi.Objective(e2e_p99_ms=1000.0))
    assert plan.ranked == [] and plan.best is None
    assert {o.status for o in plan.options} == {c.MISSES_OBJECTIVE}
    l40s = next(o for o in plan.options if o.option.accelerator_slug == "l40s")
    assert l40s.closest is not None and l40s.closest.batch_size == 16  # lowest p99 it reached
    assert any("No benchmarked option meets p99 e2e ≤ 1,000 ms" in n for n in plan.notes)

    plan = _peaky_plan(objective=pi.Objective(ttft_p99_ms=200.0))
    assert {o.status for o in plan.options} == {c.OBJECTIVE_UNMEASURED}
    assert all("measured p99 TTFT" in o.notes[0] for o in plan.options)

    plan = _peaky_plan(objective=pi.Objective())
    assert {o.status for o in plan.options} == {c.NO_OBJECTIVE}
    assert plan.headline() == "Set a latency objective to size the options."


def test_it_sizes_but_does_not_rank_an_option_without_a_price() -> None:
    plan = _peaky_plan(prices={"h100": _price(per_gpu_hour=2.0)})
    l40s = next(o for o in plan.options if o.option.accelerator_slug == "l40s")
    assert l40s.status == c.NO_PRICE and l40s.replicas == 10 and l40s.total_monthly is None
    assert [o.option.accelerator_slug for o in plan.ranked] == ["h100"]


def test_it_packs_replicas_into_whole_instances() -> None:
    assert c._instances(replicas=5, per_replica=1, instance_gpus=8) == 1
    assert c._instances(replicas=9, per_replica=1, instance_gpus=8) == 2
    assert c._instances(replicas=3, per_replica=2, instance_gpus=8) == 1  # 4 replicas fit in one
    assert c._instances(replicas=5, per_replica=2, instance_gpus=8) == 2
    assert c._instances(replicas=2, per_replica=8, instance_gpus=1) == 16
    assert c._instances(replicas=3, per_replica=4, instance_gpus=8) == 2
    plan = _peaky_plan(
        prices={"h100": _price(per_gpu_hour=2.0, instance_gpus=8), "l40s": _price(per_gpu_hour=0.9)}
    )
    h100 = next(o for o in plan.options if o.option.accelerator_slug == "h100")
    # 2 replicas of 1 GPU on an 8-GPU server: 1 instance, 8 GPUs billed, 6 idle, $16 × 730.
    assert (h100.instances, h100.billed_gpus, h100.capacity_monthly) == (1, 8, Decimal(16 * 730))
    assert any("6 billed GPUs left idle" in note for note in h100.notes)


def test_it_ranks_a_variant_over_its_accuracy_budget_last_and_never_recommends_it() -> None:
    accuracy = {"fp16": pi.Accuracy(reference="fp32", loss=0.03, budget=0.01, verdict="over")}
    plan = _peaky_plan(accuracy=accuracy)
    assert [o.option.accelerator_slug for o in plan.ranked] == ["l40s", "h100"]
    assert plan.best is not None and plan.best.option.accelerator_slug == "l40s"
    plan = _peaky_plan(accuracy=accuracy, prices={"h100": _price(per_gpu_hour=2.0)})
    assert plan.best is None  # the only ranked option is over budget
    h100 = plan.ranked[0]
    assert any("3.00% below fp32, over its 1.0% budget" in note for note in h100.notes)


def test_it_flags_few_runs_one_load_level_missing_energy_and_a_stale_price() -> None:
    option = pi.serving_options_build(points=[_point(run_ids=(7,), throughput=20000.0, p99_ms=900.0)])[0]
    plan = c.plan_build(
        _inputs(_shape(PEAKY), [option], prices={"h100": _price(per_gpu_hour=2.0, stale=True)})
    )
    notes = " ".join(plan.options[0].notes)
    assert "Only 1 run behind" in notes
    assert "One load level measured" in notes
    assert "No power or energy measured" in notes
    assert "more than 30 days ago" in notes
    assert "No accuracy comparison" in notes
    # 10 000 × 1.2 / 20 000 -> 1 replica, + 1 spare: 2 × $2 × 730, and no energy line.
    assert plan.options[0].energy_monthly is None and plan.options[0].total_monthly == Decimal(2 * 2 * 730)


def test_it_converts_prices_with_an_exchange_rate_and_refuses_to_guess_one() -> None:
    rate = ExchangeRate(
        from_currency="EUR",
        to_currency="USD",
        rate=Decimal("1.1"),
        ref=PriceRef(kind="exchange_rate", id=3, source="ecb"),
    )
    prices = {"h100": _price(per_gpu_hour=2.0, currency="EUR"), "l40s": _price(per_gpu_hour=0.9)}
    plan = _peaky_plan(prices=prices, rates=(rate,))
    h100 = next(o for o in plan.options if o.option.accelerator_slug == "h100")
    assert h100.total_monthly == Decimal("2") * Decimal("2.0") * Decimal("1.1") * 730  # 3 212, exactly
    plan = _peaky_plan(prices=prices)
    h100 = next(o for o in plan.options if o.option.accelerator_slug == "h100")
    assert h100.status == c.OTHER_CURRENCY and h100.total_monthly is None


def test_it_compares_with_what_runs_today() -> None:
    current = pi.CurrentDeployment(
        gpus=4,
        hardware="4× H100 SXM 80GB",
        variants=("fp16",),
        accelerator_slugs=("h100",),
        monthly_cost=Decimal("4000"),
        currency="USD",
        cost_days=28,
    )
    plan = _peaky_plan(current=current)
    h100 = next(o for o in plan.options if o.option.accelerator_slug == "h100")
    assert h100.is_current
    assert h100.saving_monthly == Decimal("1080")
    assert h100.saving_pct == pytest.approx(1080.0 / 4000.0)
    l40s = next(o for o in plan.options if o.option.accelerator_slug == "l40s")
    assert not l40s.is_current and l40s.saving_monthly == Decimal("-2570")


# --- Traffic over weeks --------------------------------------------------------------------------


def _weeks(days: int, *, daily_growth: float, weekend: float = 0.6) -> list[pi.TrafficBucket]:
    buckets = []
    for d in range(days):
        level = (1 + daily_growth) ** d * (weekend if (DAY0 + timedelta(days=d)).weekday() >= 5 else 1.0)
        for h in range(24):
            shape = 0.5 if h < 8 else 1.0
            buckets.append(
                _bucket(DAY0 + timedelta(days=d, hours=h), rps=10 * level * shape, prompt=1000, output=200)
            )
    return buckets


def test_it_reads_growth_from_whole_weeks_so_weekends_cancel_out() -> None:
    shape = _shape(_weeks(28, daily_growth=0.01), days=28)
    assert shape.complete_days == 28
    # The last week's mean over the first's is 1.01^21 (weekends in both); 21 days apart between
    # their centres, so per month 1.01^30.4375 − 1 = 35.4 %.
    assert shape.growth_pct_per_month == pytest.approx(100 * (1.01**30.4375 - 1), rel=1e-3)
    flat = _shape(_weeks(28, daily_growth=0.0), days=28)
    assert flat.growth_pct_per_month == pytest.approx(0.0, abs=0.2)
    # The peak is the highest daily peak: the last weekday, not a weekend.
    assert shape.peak_output_tps == pytest.approx(max(d.peak_output_tps for d in shape.days))
    assert shape.days[-1].day.weekday() == 6 and shape.peak_at is not None and shape.peak_at.weekday() < 5
    short = _shape(_weeks(10, daily_growth=0.01), days=10)
    assert short.growth_pct_per_month is None


def test_it_never_counts_a_day_the_window_cuts_as_complete() -> None:
    # 15 days of traffic, the window from noon of the first to noon of the last: the two cut days
    # would each miss half the daily cycle, so only the 14 between count, and give no trend.
    buckets = _weeks(16, daily_growth=0.0)
    noon = DAY0 + timedelta(hours=12)
    inside = [b for b in buckets if noon <= b.start < noon + timedelta(days=15)]
    shape = pi.traffic_shape_build(
        buckets=inside, window_start=noon, window_end=noon + timedelta(days=15), bucket_s=HOUR
    )
    assert [d.complete for d in shape.days] == [False] + [True] * 14 + [False]
    assert shape.growth_pct_per_month == pytest.approx(0.0, abs=0.2)


def test_it_says_when_the_traffic_is_gappy_or_too_short_for_a_trend() -> None:
    buckets = [b for b in _weeks(10, daily_growth=0.0) if b.start.hour % 2 == 0]  # half the buckets
    plan = c.plan_build(_inputs(_shape(buckets, days=10), []))
    text = " ".join(plan.notes)
    assert "Traffic covers 50% of the window's 60-minute buckets" in text
    assert "Only 0 complete days of traffic" in text
    assert "No benchmark of this model measured token throughput" in text


def test_it_refuses_assumptions_out_of_range_naming_the_field() -> None:
    with pytest.raises(pi.PlanInputError, match="headroom_pct"):
        pi.Assumptions(headroom_pct=-5)
    with pytest.raises(pi.PlanInputError, match="horizon_months"):
        pi.Assumptions(horizon_months=99)
    with pytest.raises(pi.PlanInputError, match="ttft_p99_ms"):
        pi.Objective(ttft_p99_ms=0)


# --- Sensitivity ---------------------------------------------------------------------------------


def test_it_shows_where_growth_and_headroom_change_the_answer() -> None:
    inputs = _inputs(
        _shape(PEAKY),
        pi.serving_options_build(points=[*H100_POINTS, *L40S_POINTS]),
        objective=pi.Objective(e2e_p99_ms=4000.0),
        assumptions=pi.Assumptions(
            growth_pct_per_month=0.0, horizon_months=1, headroom_pct=0.0, n_plus_one=False
        ),
        prices={"h100": _price(per_gpu_hour=2.0), "l40s": _price(per_gpu_hour=0.9)},
    )
    keys = [o.key for o in inputs.options]
    series = c.growth_sensitivity(inputs=inputs, growths=[0.0, 10.0, 60.0], keys=keys)
    by_slug = {o.accelerator_slug: series[o.key] for o in inputs.options}
    # H100: 10 000 × (1, 1.1, 1.6) / 10 000 -> 1, 2, 2 replicas × $1 460.
    assert by_slug["h100"] == [Decimal("1460"), Decimal("2920"), Decimal("2920")]
    # L40S: / 5 000 -> 2, 3, 4 replicas × $657.
    assert by_slug["l40s"] == [Decimal("1314"), Decimal("1971"), Decimal("2628")]
    rows = c.headroom_sensitivity(inputs=inputs, headrooms=[0.0, 50.0])
    # Headroom 50 %: H100 15 000 / 10 000 -> 2 × $1 460 = $2 920; L40S 15 000 / 5 000 -> 3 × $657 = $1 971.
    assert [(r.best_label, r.total_monthly) for r in rows] == [
        ("fp8 on 1× L40S", Decimal("1314")),
        ("fp8 on 1× L40S", Decimal("1971")),
    ]


def test_it_never_calls_a_known_cost_of_today_unknown() -> None:
    """The saving card, the notes and the exports give one reason for a missing saving, the real one."""
    current = pi.CurrentDeployment(
        gpus=4,
        hardware="4× H100 SXM 80GB",
        variants=("fp16",),
        accelerator_slugs=("h100",),
        monthly_cost=Decimal("47139.74"),
        currency="USD",
        cost_days=28,
    )
    # Nothing meets a 1 ms objective: no option, but today's cost is known and said.
    plan = _peaky_plan(current=current, objective=pi.Objective(e2e_p99_ms=1.0))
    assert plan.best is None
    assert plan.saving_missing is not None
    assert "unknown" not in plan.saving_missing and "47,140 USD per month" in plan.saving_missing
    assert not any("cost is unknown" in note for note in plan.notes)
    # Today's cost missing: the reason is the first missing input of the cost tables, with its fix.
    gap = cost_gap(
        host="gpu-a", accelerator="H100 SXM 80GB", provider="on-prem", region="east", price_found=False
    )
    plan = _peaky_plan(current=replace(current, monthly_cost=None, cost_gap=gap))
    assert plan.saving_missing == c.today_missing(plan.inputs.current)
    assert "no price row for H100 SXM 80GB at on-prem east" in plan.saving_missing
    assert any(note.startswith(plan.saving_missing) for note in plan.notes)
    assert "no serving costs computed" not in " ".join(plan.notes)


def test_it_splits_the_saving_into_hardware_and_price_basis() -> None:
    """Today is priced on the hosts' own rows (cloud, 3.00 per GPU-hour), the plan on its basis
    (2.00 for the H100): the saving is the sum of the change of basis and that of hardware."""
    current = pi.CurrentDeployment(
        gpus=4,
        hardware="4× H100 SXM 80GB",
        variants=("fp16",),
        accelerator_slugs=("h100",),
        monthly_cost=Decimal("9000"),
        capacity_monthly=Decimal("8760"),  # 4 GPUs × 730 h × 3.00
        currency="USD",
        cost_days=28,
        price_basis="aws p5.48xlarge on-demand",
    )
    plan = _peaky_plan(current=current)
    # Re-priced on the plan's 2.00: 9000 − 8760 + 4 × 730 × 2.00 = 6080.
    assert c.today_rebased(plan.inputs) == Decimal("6080")
    for option in plan.options:
        if option.saving_monthly is None:
            continue
        assert option.saving_basis == Decimal("2920")
        assert option.saving_basis + option.saving_hardware == option.saving_monthly
    # Today on several GPU types, or a type the basis has no price for: not split, never guessed.
    assert (
        c.today_rebased(replace(plan.inputs, current=replace(current, accelerator_slugs=("a100",)))) is None
    )
