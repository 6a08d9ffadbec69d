"""Hardware comparison maths, worked by hand: medians of recent runs, Pareto frontier, sweep knee,
and the recommendation (cheapest configuration meeting a p99 target above a precision floor)."""

from __future__ import annotations

from typing import Any

import pytest

from accelboard.dashboard.hardware import (
    RunFigures,
    config_points_build,
    pareto_frontier,
    precision_allowed,
    recommend,
    sweep_knee,
    sweeps_build,
)

_run_ids = iter(range(1, 10_000))


def _run(**kwargs: Any) -> RunFigures:
    defaults: dict[str, Any] = {
        "run_id": next(_run_ids),
        "started_at": 1,
        "variant": "bf16",
        "precision": "bf16",
        "accelerator": "H100",
        "accelerator_count": 1,
        "batch_size": 64,
        "throughput": 1000.0,
        "throughput_unit": "tokens/s",
        "currency": "USD",
        "cost_unit": "token",
    }
    defaults.update(kwargs)
    return RunFigures(**defaults)


def _point(variant: str, precision: str, accelerator: str, p99: float | None, cost: float | None, **kw: Any):
    runs = [
        _run(
            variant=variant,
            precision=precision,
            accelerator=accelerator,
            p99_ms=p99,
            total_cost_per_1m=cost,
            **kw,
        )
    ]
    return config_points_build(runs=runs)[0]


# --- configuration summary ------------------------------------------------------------------------


def test_it_takes_the_median_of_the_last_five_runs_of_a_configuration() -> None:
    # Oldest first; the 1000 of the oldest run falls outside the last five.
    throughputs = [1000.0, 100.0, 110.0, 90.0, 105.0, 95.0]
    runs = [
        _run(
            run_id=100 + i,
            started_at=i,
            throughput=value,
            power_w=400.0,
            memory_peak_bytes=60e9,
            memory_total_bytes=80e9,
            capacity_cost_per_1m=0.10 * (i + 1),
            energy_cost_per_1m=0.01,
            total_cost_per_1m=0.10 * (i + 1) + 0.01,
        )
        for i, value in enumerate(throughputs)
    ]
    [point] = config_points_build(runs=runs)

    assert point.throughput == 100.0  # median of 100, 110, 90, 105, 95
    assert point.run_ids == (105, 104, 103, 102, 101)
    assert point.latest_run_id == 105
    assert point.throughput_per_w == pytest.approx(100.0 / 400.0)
    assert point.memory_headroom_bytes == pytest.approx(20e9)
    assert point.memory_headroom_pct == pytest.approx(25.0)
    # Capacity median of 0.2..0.6 is 0.4; total = capacity + energy, so the table adds up.
    assert point.capacity_cost_per_1m == pytest.approx(0.4)
    assert point.total_cost_per_1m == pytest.approx(0.41)


def test_it_keeps_configurations_apart_by_variant_hardware_count_and_load() -> None:
    runs = [
        _run(variant="bf16"),
        _run(variant="fp8", precision="fp8"),
        _run(accelerator="L40S"),
        _run(accelerator_count=8),
        _run(batch_size=128),
        _run(batch_size=128),
    ]
    points = config_points_build(runs=runs)
    assert len(points) == 5
    assert [len(p.run_ids) for p in points if p.batch_size == 128] == [2]


def test_it_drops_the_cost_of_a_configuration_priced_in_two_currencies() -> None:
    runs = [
        _run(started_at=1, total_cost_per_1m=1.0, currency="USD"),
        _run(started_at=2, total_cost_per_1m=0.9, currency="EUR"),
    ]
    [point] = config_points_build(runs=runs)
    assert point.total_cost_per_1m is None
    assert point.currency == ""


def test_it_leaves_missing_figures_missing() -> None:
    [point] = config_points_build(runs=[_run(throughput=None, power_w=None)])
    assert point.throughput is None
    assert point.throughput_per_w is None
    assert point.memory_headroom_bytes is None


# --- Pareto frontier ------------------------------------------------------------------------------


def test_it_draws_the_pareto_frontier_of_cost_and_latency() -> None:
    points = [
        (1.0, 30.0),  # A: frontier
        (2.0, 20.0),  # B: frontier
        (1.5, 35.0),  # C: dominated by A (costlier and slower)
        (3.0, 20.0),  # D: dominated by B (same latency, costlier)
        (2.0, 20.0),  # E: equal to B: both stay
        (0.5, 100.0),  # F: cheapest: frontier
        (1.0, 31.0),  # G: same cost as A, slower: dominated
    ]
    assert pareto_frontier(points=points) == [True, True, False, False, True, True, False]


def test_it_has_an_empty_frontier_for_no_points() -> None:
    assert pareto_frontier(points=[]) == []


# --- sweep knee -----------------------------------------------------------------------------------


def test_it_finds_the_knee_where_p99_starts_growing_faster_than_throughput() -> None:
    # Growth per step: 8->16 tput +90% p99 +5%; 16->32 +84% / +14%; 32->64 +43% / +50% (p99 wins).
    points = [
        (8.0, 1000.0, 20.0),
        (16.0, 1900.0, 21.0),
        (32.0, 3500.0, 24.0),
        (64.0, 5000.0, 36.0),
        (128.0, 5600.0, 60.0),
    ]
    knee = sweep_knee(points=points)
    assert knee is not None
    assert knee.index == 2
    assert knee.reached


def test_it_says_when_the_knee_is_not_reached_in_the_measured_range() -> None:
    knee = sweep_knee(points=[(1.0, 100.0, 10.0), (2.0, 200.0, 11.0), (4.0, 390.0, 12.0)])
    assert knee is not None
    assert (knee.index, knee.reached) == (2, False)


def test_it_has_no_knee_for_one_point_or_unusable_figures() -> None:
    assert sweep_knee(points=[(1.0, 100.0, 10.0)]) is None
    assert sweep_knee(points=[(1.0, 0.0, 10.0), (2.0, 100.0, 11.0)]) is None
    with pytest.raises(ValueError):
        sweep_knee(points=[(2.0, 100.0, 10.0), (1.0, 200.0, 11.0)])


def test_it_builds_one_sweep_per_variant_and_hardware_with_two_loads_or_more() -> None:
    runs = [
        _run(accelerator="H100", batch_size=8, throughput=1000.0, p99_ms=20.0),
        _run(accelerator="H100", batch_size=32, throughput=3500.0, p99_ms=24.0),
        _run(accelerator="H100", batch_size=16, throughput=1900.0, p99_ms=21.0),
        _run(accelerator="H100", batch_size=64, throughput=5000.0, p99_ms=36.0),
        _run(accelerator="L40S", batch_size=8, throughput=400.0, p99_ms=30.0),  # one load: no sweep
    ]
    [sweep] = sweeps_build(points=config_points_build(runs=runs))
    assert sweep.label == "bf16 on 1× H100"
    assert [p.batch_size for p in sweep.points] == [8, 16, 32, 64]
    assert sweep.knee is not None and sweep.knee.index == 2  # batch 32


# --- recommendation -------------------------------------------------------------------------------


def _candidates() -> list:
    return [
        _point("bf16", "bf16", "H100", p99=30.0, cost=0.50),
        _point("fp8", "fp8", "H100", p99=18.0, cost=0.30),
        _point("int4-awq", "int4", "H100", p99=15.0, cost=0.20),
        _point("fp8", "fp8", "L40S", p99=45.0, cost=0.25),
        _point("bf16", "bf16", "MI300X", p99=19.0, cost=0.45),
    ]


def test_it_recommends_the_cheapest_configuration_meeting_the_target() -> None:
    answer = recommend(points=_candidates(), p99_target_ms=20.0)
    assert answer.best is not None
    assert (answer.best.variant, answer.best.accelerator) == ("int4-awq", "H100")
    assert [(p.variant, p.accelerator) for p in answer.runners_up] == [("fp8", "H100"), ("bf16", "MI300X")]
    assert answer.qualifying == 3
    assert answer.message == (
        "int4-awq on 1× H100 (batch 64) meets p99 ≤ 20 ms at the lowest cost: 0.2 USD per 1M tokens (p99 15 ms)."
    )


def test_it_respects_the_precision_floor() -> None:
    fp8 = recommend(points=_candidates(), p99_target_ms=20.0, precision_floor="fp8")
    assert fp8.best is not None and (fp8.best.variant, fp8.best.accelerator) == ("fp8", "H100")
    assert fp8.below_floor == 1
    bf16 = recommend(points=_candidates(), p99_target_ms=20.0, precision_floor="bf16")
    assert bf16.best is not None and (bf16.best.variant, bf16.best.accelerator) == ("bf16", "MI300X")
    assert bf16.runners_up == []


def test_it_names_the_fastest_when_nothing_meets_the_target() -> None:
    answer = recommend(points=_candidates(), p99_target_ms=10.0)
    assert answer.best is None
    assert answer.fastest is not None and answer.fastest.p99_ms == 15.0
    assert answer.message == "Nothing meets 10 ms; the fastest is int4-awq on 1× H100 (batch 64) at 15 ms."
    floored = recommend(points=_candidates(), p99_target_ms=10.0, precision_floor="bf16")
    assert floored.message == (
        "Nothing meets 10 ms at bf16 or better; the fastest is bf16 on 1× MI300X (batch 64) at 19 ms."
    )


def test_it_counts_what_it_could_not_rank() -> None:
    points = [
        *_candidates(),
        _point("fp8", "fp8", "L4", p99=5.0, cost=None),  # cheapest-looking but no price: not ranked
        _point("fp8", "fp8", "A100", p99=None, cost=0.01),
        _point("fp8", "fp8", "H200", p99=12.0, cost=0.05, currency="EUR"),
    ]
    answer = recommend(points=points, p99_target_ms=20.0)
    assert answer.best is not None and answer.best.variant == "int4-awq"
    assert (answer.without_cost, answer.without_p99, answer.other_currency) == (1, 1, 1)
    assert answer.considered == 8


def test_it_rejects_a_target_that_is_not_positive_and_an_unknown_floor() -> None:
    with pytest.raises(ValueError):
        recommend(points=_candidates(), p99_target_ms=0.0)
    with pytest.raises(ValueError):
        precision_allowed(precision="fp8", floor="fp3")


def test_it_orders_precisions_by_bit_width() -> None:
    assert precision_allowed(precision="int8", floor="fp8")
    assert precision_allowed(precision="fp16", floor="fp8")
    assert not precision_allowed(precision="int4", floor="fp8")
    assert precision_allowed(precision="int4", floor=None)


def test_it_finds_the_knees_the_demo_plan_was_built_with() -> None:
    from accelboard.demo import benchmark_plan

    runs = [
        _run(
            variant=bench["variant"],
            precision="fp8",
            accelerator=bench["gpu"],
            batch_size=bench["workload"]["batch_size"],
            throughput=bench["base"][0],
            p99_ms=bench["base"][1] * 1.6,  # the generator's LLM p99 / p50 ratio
        )
        for bench in benchmark_plan.BENCHMARKS
        if (bench["model"], bench["variant"]) == ("Llama-3.1-8B", "fp8")
    ]
    sweeps = {s.points[0].accelerator: s for s in sweeps_build(points=config_points_build(runs=runs))}
    assert set(sweeps) == {"h100-sxm-80gb", "l40s"}
    for gpu, knee_batch in (("h100-sxm-80gb", 64), ("l40s", 32)):
        knee = sweeps[gpu].knee
        assert knee is not None and knee.reached
        assert sweeps[gpu].points[knee.index].batch_size == knee_batch


def test_it_puts_costs_spanning_more_than_a_decade_on_a_log_axis() -> None:
    from accelboard.dashboard.hardware_charts import pareto_figure

    narrow = [
        _point("fp8", "fp8", "H100", p99=20.0, cost=0.2),
        _point("fp8", "fp8", "L4", p99=40.0, cost=1.0),
    ]
    wide = [
        _point("fp8", "fp8", "H100", p99=20.0, cost=0.03),
        _point("fp8", "fp8", "L4", p99=40.0, cost=0.75),
    ]
    linear = pareto_figure(points=narrow, frontier=[True, False], currency="USD", cost_unit="token")["layout"]
    assert linear["yaxis"]["rangemode"] == "tozero" and "type" not in linear["yaxis"]
    log = pareto_figure(points=wide, frontier=[True, False], currency="USD", cost_unit="token")["layout"]
    assert log["yaxis"]["type"] == "log"
    # 1-2-5 ticks from 0.03 / 2.5 to 0.75 × 2.5.
    assert log["yaxis"]["tickvals"] == [0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    assert log["yaxis"]["ticktext"] == ["0.02", "0.05", "0.1", "0.2", "0.5", "1"]
