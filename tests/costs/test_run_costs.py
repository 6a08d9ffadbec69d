"""Per-run cost: a vLLM-like run worked by hand, energy sources, estimates flagged, training."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.costs.models import RunCost
from accelboard.costs.pricebook_selectors import price_book_load
from accelboard.costs.run_cost_services import run_cost_compute, run_costs_compute
from accelboard.costs.selectors import run_costs_for
from tests.costs.builders import (
    accelerator_price_create,
    electricity_price_create,
    host_place,
    minutes_load,
    site_create,
)
from tests.factories import H100, accelerator_type_from, host_create, run_create

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


@pytest.fixture
def lambda_h100(team):
    """1×H100 on Lambda at $3.29/h; its site at $0.10/kWh, PUE 1.58, 475 gCO2e/kWh."""
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    site = site_create(name="lambda-usw", provider="lambda", region="us-west-1")
    host_place(host, site=site, provider="lambda", region="us-west-1", instance_type="gpu_1x_h100_sxm5")
    price = accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="3.29",
        count=1,
        provider="lambda",
        region="us-west-1",
        instance_type="gpu_1x_h100_sxm5",
    )
    electricity = electricity_price_create(site=site)
    return host, gpus, h100, price, electricity


def _finish(run: BenchmarkRun, seconds: float) -> BenchmarkRun:
    BenchmarkRun.objects.filter(pk=run.pk).update(finished_at=run.started_at + timedelta(seconds=seconds))
    run.refresh_from_db()
    return run


def test_it_costs_a_vllm_run_per_million_tokens_as_in_design(team, lambda_h100):
    # A published reference: Qwen3-8B on one H100 in vLLM, 4,890 tok/s at 0.0935 J per token.
    host, gpus, h100, price, electricity = lambda_h100
    run = run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=START,
        metrics={"throughput_tokens_per_s": 4890.0, "energy_per_token_j": 0.0935},
    )
    cost = run_cost_compute(run=run)

    assert (cost.unit, cost.energy_source) == ("token", "reported")
    assert cost.energy_per_unit_j == pytest.approx(0.0935)
    assert cost.energy_per_1k_j == pytest.approx(93.5)
    # Capacity: 1e6 / 4890 s × 1 GPU × $3.29 / 3600 = $0.186889 per 1M tokens.
    assert cost.capacity_cost_per_1m == Decimal("0.186889")
    # Energy: 93,500 J = 0.0259722 kWh × 1.58 = 0.0410361 kWh × $0.10 = $0.004104.
    assert cost.energy_cost_per_1m == Decimal("0.004104")
    assert cost.total_cost_per_1m == Decimal("0.190993")
    # Carbon: 0.0410361 kWh × 475 g = 19.49 g per 1M tokens.
    assert cost.carbon_g_per_1m == pytest.approx(19.4922, abs=1e-3)
    assert (cost.accelerator_price_id, cost.electricity_price_id, cost.currency) == (
        price.pk,
        electricity.pk,
        "USD",
    )
    assert cost.flags == []
    assert run_costs_for(run_ids=[run.pk]) == {run.pk: cost}

    # Recomputing replaces the one row.
    run_cost_compute(run=run)
    assert RunCost.objects.filter(run=run).count() == 1


def test_it_says_when_a_run_has_no_measured_energy(team):
    run = run_create(team=team, started_at=START, metrics={"throughput_tokens_per_s": 1000.0})
    cost = run_cost_compute(run=run)
    assert cost.energy_j is None and cost.energy_per_unit_j is None and cost.energy_source == ""
    assert {"no-energy", "no-host", "no-accelerator-price"} <= set(cost.flags)
    assert cost.total_cost_per_1m is None


def test_it_takes_energy_per_unit_from_average_power_without_a_duration(team, lambda_h100):
    host, gpus, h100, price, electricity = lambda_h100
    run = run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=START,
        metrics={"throughput_tokens_per_s": 4890.0, "power_avg_w": 560.0},
    )
    cost = run_cost_compute(run=run)
    # 560 W at 4,890 tokens/s: 0.11452 J per token, whatever the run's length (not recorded).
    assert (cost.energy_source, cost.energy_j) == ("power", None)
    assert cost.energy_per_unit_j == pytest.approx(560.0 / 4890.0)
    assert cost.energy_cost_per_1m is not None and "no-energy" not in cost.flags


def test_it_labels_a_board_power_estimate_as_one(team, lambda_h100):
    host, gpus, h100, price, electricity = lambda_h100
    run = run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=START,
        metrics={"throughput_samples_per_s": 100.0, "wall_time_s": 60.0},
    )
    cost = run_cost_compute(run=run)
    # No telemetry, nothing reported: 700 W × 1 GPU × 60 s = 42 kJ over 6,000 samples = 7 J each.
    assert (cost.unit, cost.energy_source) == ("sample", "board-power-estimate")
    assert cost.energy_per_unit_j == pytest.approx(7.0)
    assert "energy-estimated" in cost.flags


def test_it_reads_the_hosts_telemetry_and_flags_a_disagreeing_report(team, lambda_h100):
    host, gpus, h100, price, electricity = lambda_h100
    # 10 minutes at 500 W: 300 kJ measured. The tool reports 360 kJ (20 % more).
    minutes_load(gpus=gpus, start=START, minutes=10, util=90.0, power_w=500.0)
    run = _finish(
        run_create(
            team=team,
            accelerator_type=h100,
            host=host,
            started_at=START,
            metrics={"throughput_tokens_per_s": 1000.0},
        ),
        600,
    )
    cost = run_cost_compute(run=run)
    assert cost.energy_source == "counter"
    assert cost.energy_j == pytest.approx(300_000.0)
    assert cost.energy_per_unit_j == pytest.approx(0.5)  # 300 kJ / 600,000 tokens

    run2 = _finish(
        run_create(
            team=team,
            accelerator_type=h100,
            host=host,
            started_at=START,
            metrics={"throughput_tokens_per_s": 1000.0, "energy_j": 360_000.0},
        ),
        600,
    )
    cost2 = run_cost_compute(run=run2)
    assert cost2.energy_source == "reported" and cost2.energy_j == pytest.approx(360_000.0)
    assert "energy-disagreement" in cost2.flags
    assert cost2.inputs["telemetry_energy_j"] == pytest.approx(300_000.0)


def test_it_costs_a_training_run_to_its_target(team, lambda_h100):
    host, gpus, h100, price, electricity = lambda_h100
    # 1 h to train at 2,000 samples/s reporting 2.52 MJ (700 W for an hour).
    run = run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=START,
        metrics={"throughput_samples_per_s": 2000.0, "time_to_train_s": 3600.0, "energy_j": 2_520_000.0},
    )
    cost = run_cost_compute(run=run)
    t = cost.training
    assert t["time_to_train_s"] == 3600.0 and t["energy_to_train_j"] == 2_520_000.0
    # $3.29 capacity + 0.7 kWh × 1.58 × $0.10 = $0.1106 energy: $3.4006 to train.
    assert t["cost_to_train"] == pytest.approx(3.4006)
    # Capacity and energy apart, adding up to the whole: 1 GPU-hour × $3.29; 0.1106.
    assert (t["capacity_cost_to_train"], t["energy_cost_to_train"]) == (3.29, 0.1106)
    assert t["capacity_cost_to_train"] + t["energy_cost_to_train"] == pytest.approx(t["cost_to_train"])
    assert t["energy_source"] == "reported"
    assert t["per_sample_j"] == pytest.approx(0.35)  # 2.52 MJ / 7.2M samples
    assert t["per_sample_cost"] == pytest.approx(3.4006 / 7_200_000)


def test_it_costs_many_runs_at_once_with_the_same_figures(team, lambda_h100):
    host, gpus, h100, price, electricity = lambda_h100
    minutes_load(gpus=gpus, start=START, minutes=10, util=90.0, power_w=500.0)
    runs = [
        _finish(
            run_create(team=team, accelerator_type=h100, host=host, started_at=START, metrics=metrics), 600
        )
        for metrics in (
            {"throughput_tokens_per_s": 4890.0, "energy_per_token_j": 0.0935},
            {"throughput_tokens_per_s": 1000.0},
            {"latency_p99_ms": 40.0},  # nothing to cost a unit by
        )
    ]
    one_by_one = [run_cost_compute(run=run) for run in runs]
    assert run_costs_compute(runs=runs, book=price_book_load()) == 2
    again = run_costs_for(run_ids=[r.pk for r in runs])
    assert set(again) == {runs[0].pk, runs[1].pk} and one_by_one[2] is None
    for before in one_by_one[:2]:
        after = again[before.run_id]
        assert (after.total_cost_per_1m, after.energy_j, after.energy_source, after.flags) == (
            before.total_cost_per_1m,
            before.energy_j,
            before.energy_source,
            before.flags,
        )
