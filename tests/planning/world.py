"""A small world for the plan page, built through the product's write paths, with figures a
person can redo on paper.

Llama-2-70B served by ``team`` on one host of 8 H200s (fp8), for 14 whole days of 15-minute
intervals: 10 req/s from 00:00 to 08:00 UTC, 40 from 08:00 to 20:00, 20 until midnight, 1 000
prompt and 250 output tokens each. So: peak 40 × 250 = 10 000 output tokens/s, mean
(8 × 10 + 12 × 40 + 4 × 20) / 24 × 250 = 6 666.7 tokens/s, no growth.

Benchmarks (3 nightly runs each, 1 024 in / 256 out tokens): fp8 on 8× H200 (TensorRT-LLM) at
batch 32 (20 000 tokens/s, p99 10 240 ms) and 64 (30 000, 15 744 ms); fp16 on 8× H100 (vLLM) at
batch 32 (10 000, 14 400 ms), 64 (16 000, 20 000 ms) and 128 (27 000, 30 400 ms). The team's SLO
is p99 ≤ 18 000 ms. Prices: on-prem 8-GPU servers, H100 $6.3927/h, H200 $7.5342/h, site power
$0.068/kWh at PUE 1.3. Today's serving cost: $200 a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from accelboard.alerts.threshold_services import serving_slo_set
from accelboard.benchmarks.models import Model, ModelVariant
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice, ServingCostDaily
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType, Host, Site
from accelboard.importers.metrics import METRICS
from accelboard.serving.services import IntervalInput, inference_metrics_store
from tests.factories import host_create

MODEL = "Llama-2-70B"
H100_PER_HOUR = Decimal("6.3927")
H200_PER_HOUR = Decimal("7.5342")
DAILY_COST = Decimal("200.00")
SLO_MS = 18_000.0
DAYS = 14

# (variant, precision, accelerator slug, framework, batch) -> throughput, p99, power of the replica
CONFIGS: dict[tuple[str, str, str, str, int], tuple[float, float, float]] = {
    ("fp8", "fp8", "h200-sxm-141gb", "TensorRT-LLM", 32): (20_000.0, 10_240.0, 4_300.0),
    ("fp8", "fp8", "h200-sxm-141gb", "TensorRT-LLM", 64): (30_000.0, 15_744.0, 5_100.0),
    ("fp16", "fp16", "h100-sxm-80gb", "vLLM", 32): (10_000.0, 14_400.0, 4_400.0),
    ("fp16", "fp16", "h100-sxm-80gb", "vLLM", 64): (16_000.0, 20_000.0, 5_200.0),
    ("fp16", "fp16", "h100-sxm-80gb", "vLLM", 128): (27_000.0, 30_400.0, 5_400.0),
}
ACCURACY = {"fp16": 0.709, "fp8": 0.704}


def rps_at(hour: int) -> int:
    return 10 if hour < 8 else 40 if hour < 20 else 20


@dataclass
class World:
    team: Team
    model: Model
    host: Host
    start: datetime
    end: datetime


def _metrics(values: dict[str, float]) -> list[MetricInput]:
    return [MetricInput(name=name, value=value, unit=METRICS[name].unit) for name, value in values.items()]


def benchmarks_record(*, team: Team, now: datetime, runs: int = 3) -> None:
    fp16 = model_variant_get_or_create(model=MODEL, variant="fp16", precision="fp16")  # the reference
    model_variant_get_or_create(model=MODEL, variant="fp8", precision="fp8", quantization_method="FP8-static")
    assert fp16.model.reference_variant_id in (None, fp16.pk)
    for (variant, precision, slug, framework, batch), (tput, p99, power) in CONFIGS.items():
        variant_obj = model_variant_get_or_create(model=MODEL, variant=variant, precision=precision)
        workload = workload_get_or_create(
            team=team,
            variant=variant_obj,
            spec=WorkloadSpec(
                scenario="offline",
                batch_size=batch,
                input_length=1024,
                output_length=256,
                framework=framework,
            ),
        )
        for night in range(runs):
            values = {
                "throughput_tokens_per_s": tput,
                "latency_p99_ms": p99,
                "power_avg_w": power,
                "accuracy": ACCURACY[variant],
            }
            run_record(
                team=team,
                workload=workload,
                accelerator_type=AcceleratorType.objects.get(slug=slug),
                accelerator_count=8,
                started_at=now - timedelta(days=night + 1, hours=batch % 7),
                metrics=_metrics(values),
                git_commit=f"{night:02d}{batch:03d}{slug[:4]}".ljust(40, "0"),
                branch="main",
            )


def prices_record(*, today: date) -> None:
    site = Site.objects.create(name="Reno DC", provider="on-prem", region="us-west")
    ElectricityPrice.objects.create(
        site=site,
        price_per_kwh=Decimal("0.06800"),
        pue=1.3,
        carbon_g_per_kwh=350.0,
        source="test site meter",
        fetched_on=today - timedelta(days=7),
        valid_from=date(2024, 1, 1),
    )
    for slug, per_hour, instance in (
        ("h100-sxm-80gb", H100_PER_HOUR, "dgx-h100"),
        ("h200-sxm-141gb", H200_PER_HOUR, "hgx-h200"),
    ):
        AcceleratorPrice.objects.create(
            accelerator_type=AcceleratorType.objects.get(slug=slug),
            accelerator_count=8,
            provider="on-prem",
            region="us-west",
            instance_type=instance,
            pricing_model="on-prem",
            price_per_hour=per_hour,
            source=f"test capex of a {instance} over 5 years",
            fetched_on=today - timedelta(days=7),
            valid_from=date(2024, 1, 1),
        )
    # Another basis for the same types: AWS on-demand, far dearer.
    AcceleratorPrice.objects.create(
        accelerator_type=AcceleratorType.objects.get(slug="h100-sxm-80gb"),
        accelerator_count=8,
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        pricing_model="on-demand",
        price_per_hour=Decimal("54.0760"),
        source="test list price",
        fetched_on=today - timedelta(days=7),
        valid_from=date(2024, 1, 1),
    )


def traffic_record(*, team: Team, host: Host, start: datetime, days: int = DAYS) -> None:
    uuids = list(host.accelerators.order_by("index").values_list("uuid", flat=True))
    intervals = []
    for step in range(days * 96):
        at = start + timedelta(minutes=15 * step)
        requests = rps_at(at.hour) * 900
        intervals.append(
            IntervalInput(
                model=MODEL,
                variant="fp8",
                interval_start=at,
                interval_s=900,
                engine="trtllm",
                accelerator_uuids=uuids,
                requests=requests,
                prompt_tokens=requests * 1000,
                generated_tokens=requests * 250,
                e2e_ms={"p50": 6000.0, "p99": 12000.0},
            )
        )
    inference_metrics_store(team=team, host=host, batch_id="plan-test", intervals=intervals)


def serving_costs_record(*, team: Team, host: Host, start: datetime, days: int = DAYS) -> None:
    variant = ModelVariant.objects.get(model__name=MODEL, name="fp8")
    for d in range(days):
        ServingCostDaily.objects.create(
            day=(start + timedelta(days=d)).date(),
            team=team,
            variant=variant,
            host=host,
            requests=1_000,
            generated_tokens=576_000_000,
            gpu_hours=192.0,
            capacity_cost=DAILY_COST,
            energy_cost=Decimal("0"),
            cost=DAILY_COST,
            currency="USD",
            computed_at=timezone.now(),
        )


def world_build(*, team: Team, now: datetime | None = None, with_slo: bool = True) -> World:
    """The whole world. Traffic fills the day before the plan's two-week window and the window
    itself, up to the last full hour before ``now``, so the window is covered whatever the hour;
    the serving costs are the window's 14 whole days before today."""
    now = now or timezone.now()
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=DAYS + 1)
    # The catalogue's types (seeded on migrate; a transactional test's flush empties them).
    accelerator_types_sync()
    host, _ = host_create(
        team=team, gpus=8, gpu_name="NVIDIA H200", hostname="reno-h200-01", memory_bytes=150_000_000_000
    )
    benchmarks_record(team=team, now=now)
    prices_record(today=now.date())
    traffic_record(team=team, host=host, start=start, days=DAYS + 1)
    serving_costs_record(team=team, host=host, start=end.replace(hour=0) - timedelta(days=DAYS))
    model = Model.objects.get(name=MODEL)
    if with_slo:
        serving_slo_set(team=team, model=model, variant=None, p99_latency_ms=SLO_MS, min_tokens_per_s=None)
    return World(team=team, model=model, host=host, start=start, end=end)


def query(**params: Any) -> dict[str, Any]:
    """The plan page's GET parameters for the world's window (two weeks, as recorded)."""
    return {"weeks": 2, **params}
