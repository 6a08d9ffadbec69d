"""Serving cost: InferenceMetric tokens joined with the named GPUs' rollups, worked by hand."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.core.access import Action, scope_for_team
from accelboard.costs.models import ServingCostDaily
from accelboard.costs.selectors import serving_costs_for
from accelboard.costs.serving_cost_services import serving_cost_day_compute
from accelboard.serving.models import InferenceMetric
from tests.costs.builders import (
    accelerator_price_create,
    electricity_price_create,
    host_place,
    minutes_load,
    site_create,
)
from tests.factories import H100, accelerator_type_from, host_create

pytestmark = pytest.mark.django_db

DAY = date(2026, 11, 2)
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def test_it_joins_serving_tokens_with_the_named_gpus_energy(team):
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=2, gpu_name=H100["driver_name"])
    site = site_create()
    host_place(host, site=site)
    price = accelerator_price_create(accelerator_type=h100)  # $98.32 / 8 = $12.29 per GPU-hour
    electricity_price_create(site=site)  # $0.10/kWh, PUE 1.58
    variant = model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16")
    # GPU 0 serves the model for an hour at 500 W (1.8 MJ = 0.5 kWh); GPU 1 is busy with
    # something else and must not be counted.
    minutes_load(gpus=gpus, start=START, minutes=60, util=80.0, power_w=500.0)
    for i, generated in enumerate((600_000, 400_000)):
        InferenceMetric.objects.create(
            team=team,
            host=host,
            variant=variant,
            accelerator_uuids=[gpus[0].uuid],
            interval_start=START + timedelta(minutes=5 * i),
            interval_s=300,
            requests=500,
            prompt_tokens=100_000,
            generated_tokens=generated,
        )

    assert serving_cost_day_compute(day=DAY) == 1
    assert serving_cost_day_compute(day=DAY) == 1  # a re-run replaces

    row = ServingCostDaily.objects.get()
    assert (row.requests, row.prompt_tokens, row.generated_tokens) == (1000, 200_000, 1_000_000)
    assert row.gpu_hours == pytest.approx(1.0)
    assert row.energy_kwh == pytest.approx(0.5)
    # $12.29 capacity + 0.5 kWh × 1.58 × $0.10 = $0.079 energy = $12.369 for 1M tokens.
    assert row.capacity_cost == Decimal("12.2900")
    assert row.energy_cost == Decimal("0.0790")
    assert row.cost == Decimal("12.3690")
    assert row.cost_per_1m_tokens == Decimal("12.369000")
    assert row.energy_per_token_j == pytest.approx(1.8)  # 1.8 MJ / 1M tokens
    assert row.accelerator_price_id == price.pk and row.flags == []

    [item] = serving_costs_for(
        scope=scope_for_team(team, [Action.VIEW_COSTS]), start=DAY, end=DAY + timedelta(days=1)
    )
    assert (item["model"], item["variant"], item["cost_per_1m_tokens"]) == (
        "Qwen3-8B",
        "bf16",
        Decimal("12.369000"),
    )


def test_it_never_counts_another_teams_gpu_named_by_a_serving_row(team, other_team):
    # Rows stored before the API refused such names, or written by a script: the join itself
    # keeps to the team's own GPUs, so no team's cost shows another team's GPU-hours or energy.
    accelerator_type_from(H100)
    host, _ = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    _, theirs = host_create(team=other_team, gpus=1, gpu_name=H100["driver_name"])
    minutes_load(gpus=theirs, start=START, minutes=60, util=80.0, power_w=500.0)
    variant = model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16")
    InferenceMetric.objects.create(
        team=team,
        host=host,
        variant=variant,
        accelerator_uuids=[theirs[0].uuid],
        interval_start=START,
        interval_s=300,
        requests=500,
        generated_tokens=600_000,
    )
    assert serving_cost_day_compute(day=DAY) == 1
    row = ServingCostDaily.objects.get()
    assert (row.gpu_hours, row.energy_kwh) == (0.0, None)
    assert "no-gpus-named" in row.flags


def test_a_gpu_shared_by_two_variants_is_split_by_their_tokens_and_counted_once(team):
    # One H100 serves two variants for an hour at 500 W: 1 GPU-hour, 0.5 kWh, $12.29 capacity.
    # bf16 generated 750,000 tokens, int4 250,000: bf16 pays 3/4, int4 1/4, and together they
    # pay for the one GPU-hour once (before the split each paid the whole hour: 2 GPU-hours for
    # one GPU, and the report's "Not attributed to a model" line went negative).
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    site = site_create()
    host_place(host, site=site)
    accelerator_price_create(accelerator_type=h100)  # $12.29 per GPU-hour
    electricity_price_create(site=site)  # $0.10/kWh, PUE 1.58
    minutes_load(gpus=gpus, start=START, minutes=60, util=80.0, power_w=500.0)
    for name, generated in (("bf16", 750_000), ("int4", 250_000)):
        variant = model_variant_get_or_create(model="Qwen3-8B", variant=name, precision=name)
        InferenceMetric.objects.create(
            team=team,
            host=host,
            variant=variant,
            accelerator_uuids=[gpus[0].uuid],
            interval_start=START,
            interval_s=300,
            requests=100,
            generated_tokens=generated,
        )

    assert serving_cost_day_compute(day=DAY) == 2
    rows = {row.variant.name: row for row in ServingCostDaily.objects.select_related("variant")}
    assert rows["bf16"].gpu_hours == pytest.approx(0.75)
    assert rows["int4"].gpu_hours == pytest.approx(0.25)
    assert sum(row.gpu_hours for row in rows.values()) == pytest.approx(1.0)
    assert sum(row.energy_kwh for row in rows.values()) == pytest.approx(0.5)
    # 0.75 × $12.29 = $9.2175 capacity; 0.375 kWh × 1.58 × $0.10 = $0.05925 energy.
    assert rows["bf16"].capacity_cost == Decimal("9.2175")
    assert rows["int4"].capacity_cost == Decimal("3.0725")
    # Both pay the same per token: the split follows the tokens.
    assert rows["bf16"].cost_per_1m_tokens == rows["int4"].cost_per_1m_tokens
    assert all("gpu-shared-by-variants" in row.flags for row in rows.values())


def test_a_shared_gpu_whose_variants_generated_nothing_is_split_evenly(team):
    accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    minutes_load(gpus=gpus, start=START, minutes=60, util=80.0, power_w=500.0)
    for name in ("bf16", "int4"):
        variant = model_variant_get_or_create(model="Qwen3-8B", variant=name, precision=name)
        InferenceMetric.objects.create(
            team=team,
            host=host,
            variant=variant,
            accelerator_uuids=[gpus[0].uuid],
            interval_start=START,
            interval_s=300,
            requests=0,
            generated_tokens=0,
        )
    assert serving_cost_day_compute(day=DAY) == 2
    assert [row.gpu_hours for row in ServingCostDaily.objects.all()] == [
        pytest.approx(0.5),
        pytest.approx(0.5),
    ]
