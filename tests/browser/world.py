"""A small, realistic world for walking every page as every role (``tests/browser/test_every_page.py``).

Built with ``tests/factories.py`` and the product's own services, so each page has something real
to draw:

- ``team`` ("Inference Platform"): an H100 host (2 GPUs) and an L4 host (2 GPUs) at an on-prem
  site with an electricity price, two days of telemetry with rollups; price rows for both types;
  ``CostDaily`` rows made by ``cost_day_compute`` for each telemetry day.
- Llama-3.1-8B, variants bf16 and fp8, benchmarked on both hosts for twelve nights with
  throughput, latency, power and an accuracy metric; every run costed by ``run_cost_compute``.
  bf16 on the H100 drops 14% in throughput from night 8: the product's detector
  (``alerts_history_check``) replays that series and opens its alert.
- ``other_team`` ("Research"): its own H100 host with telemetry and costs, a run of Secret-70B
  and an alert; names that must never show to ``team``'s members (except finance on the cost
  pages, who sees every team's costs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from accelboard.alerts.models import Alert
from accelboard.alerts.regression_services import alerts_history_check
from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.core.models import Team
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice
from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.costs.services import cost_day_compute
from accelboard.fleet.models import Accelerator, Host, Site
from tests import factories
from tests.drift.conftest import accuracy_run

MODEL = "Llama-3.1-8B"
OTHER_MODEL = "Secret-70B"
ARC = "accuracy:arc_easy:acc_norm"
NIGHTS = 12
STEP_NIGHT = 8
# variant -> (precision, tokens/s on the H100, p99 ms on the H100, arc_easy acc_norm)
VARIANTS = {"bf16": ("bf16", 4890.0, 41.5, 0.800), "fp8": ("fp8", 7100.0, 30.0, 0.796)}
# The L4 does a fifth of the H100's work at three times its latency.
L4_SPEED, L4_LATENCY = 0.2, 3.0


@dataclass
class World:
    """What the pages should show, by object and by name."""

    team: Team
    other_team: Team
    h100_host: Host
    l4_host: Host
    other_host: Host
    run: BenchmarkRun  # the lead's team's latest bf16 run on the H100
    fp8_run: BenchmarkRun  # the latest fp8 run on the H100
    step_run: BenchmarkRun  # the first bf16 H100 run after the 14% throughput drop
    other_run: BenchmarkRun
    alert: Any
    other_alert: Any
    series: Series  # bf16 throughput on the H100, where the alert is
    model_id: int
    month: date
    type_names: list[str] = field(default_factory=list)

    # Names that identify each team's objects on a page.
    @property
    def team_marks(self) -> list[str]:
        return [self.h100_host.hostname, self.l4_host.hostname, MODEL]

    @property
    def other_marks(self) -> list[str]:
        return [self.other_host.hostname, OTHER_MODEL]


def _host_at(
    *, team: Team, hostname: str, spec: dict[str, Any], site: Site, gpus: int = 2
) -> tuple[Host, list]:
    host, accelerators = factories.host_create(
        team=team,
        gpus=gpus,
        hostname=hostname,
        gpu_name=spec["driver_name"],
        memory_bytes=spec["memory_bytes"],
        power_limit_w=spec["board_power_w"],
    )
    host.site, host.project = site, "serving"
    host.save(update_fields=["site", "project"])
    return host, accelerators


def _live_state_set(*, gpus: list[Accelerator], at: datetime, power_w: float, memory_bytes: int) -> None:
    """The live state an agent's newest sample leaves on each GPU (the ingest path does this;
    the factories copy telemetry straight into the table, so it is set here as in
    ``test_hosts_pages``)."""
    state = {
        "power_w": power_w,
        "gpu_util": 71.0,
        "mem_used_bytes": memory_bytes * 0.6,
        "mem_total_bytes": memory_bytes,
        "temperature_c": 61.0,
        "throttle_reasons": 0,
        "time": at.isoformat(),
    }
    Accelerator.objects.filter(pk__in=[g.pk for g in gpus]).update(last_state=state, last_seen_at=at)
    Host.objects.filter(pk__in={g.host_id for g in gpus}).update(last_seen_at=at)


def world_create(*, team: Team, other_team: Team) -> World:
    """Build the world (a few seconds on a 2-core machine) and return what it holds."""
    h100 = factories.accelerator_type_from(factories.H100)
    l4 = factories.accelerator_type_from(factories.L4)
    today = timezone.now().date()
    site = Site.objects.create(name="dc-east", provider="on-prem", region="east")
    ElectricityPrice.objects.create(
        site=site,
        price_per_kwh=Decimal("0.12"),
        pue=1.4,
        carbon_g_per_kwh=400.0,
        source="utility tariff (test)",
        fetched_on=today - timedelta(days=5),
        valid_from=today - timedelta(days=400),
    )
    for accelerator_type, per_hour in ((h100, "4.1000"), (l4, "0.8000")):
        AcceleratorPrice.objects.create(
            accelerator_type=accelerator_type,
            provider="on-prem",
            pricing_model="on-prem",
            price_per_hour=Decimal(per_hour),
            source="amortised capex (test)",
            fetched_on=today - timedelta(days=5),
            valid_from=today - timedelta(days=400),
        )

    h100_host, h100_gpus = _host_at(team=team, hostname="inf-h100-01", spec=factories.H100, site=site)
    l4_host, l4_gpus = _host_at(team=team, hostname="inf-l4-01", spec=factories.L4, site=site)
    other_host, other_gpus = _host_at(team=other_team, hostname="res-h100-07", spec=factories.H100, site=site)
    now = datetime.now(UTC)
    # One sample a minute, as an agent leaves in the 1-minute rollups the host charts and the cost
    # engine read (sparser samples would leave minutes unaccounted for).
    factories.telemetry_days_load(gpus=h100_gpus, days=2, interval_s=60, now=now, util_mean=70.0)
    factories.telemetry_days_load(gpus=l4_gpus, days=2, interval_s=60, now=now, power_w=60.0, seed=3)
    factories.telemetry_days_load(gpus=other_gpus, days=2, interval_s=60, now=now, seed=5)
    end = now.replace(minute=0, second=0, microsecond=0)
    for gpus, spec, power_w in (
        (h100_gpus + other_gpus, factories.H100, 405.0),
        (l4_gpus, factories.L4, 58.0),
    ):
        _live_state_set(gpus=gpus, at=now, power_w=power_w, memory_bytes=spec["memory_bytes"])
    days = sorted({(end - timedelta(days=2)).date() + timedelta(days=i) for i in range(3)})
    for day in days:
        cost_day_compute(day=day)

    start = end - timedelta(days=NIGHTS + 1)
    runs: list[BenchmarkRun] = []
    step_run = latest = fp8_latest = None
    for night in range(NIGHTS):
        for variant, (precision, tps, p99, arc) in VARIANTS.items():
            for host, accelerator_type, speed, slowness in (
                (h100_host, h100, 1.0, 1.0),
                (l4_host, l4, L4_SPEED, L4_LATENCY),
            ):
                drop = 0.86 if (variant == "bf16" and host is h100_host and night >= STEP_NIGHT) else 1.0
                wobble = 1 + 0.002 * ((night * 7 + len(variant)) % 5 - 2)
                run = accuracy_run(
                    team=team,
                    model=MODEL,
                    variant=variant,
                    precision=precision,
                    method="FP8-dynamic" if variant == "fp8" else "",
                    at=start + timedelta(days=night, minutes=len(variant) + 10 * (host is l4_host)),
                    accelerator_type=accelerator_type,
                    metrics={
                        "throughput_tokens_per_s": tps * speed * drop * wobble,
                        "latency_p50_ms": p99 * slowness / 1.6,
                        "latency_p99_ms": p99 * slowness / drop,
                        "power_avg_w": 520.0 if host is h100_host else 65.0,
                        ARC: arc * wobble,
                    },
                )
                BenchmarkRun.objects.filter(pk=run.pk).update(host=host)
                run.host = host
                runs.append(run)
                if variant == "fp8" and host is h100_host:
                    fp8_latest = run
                if variant == "bf16" and host is h100_host:
                    latest = run
                    if night == STEP_NIGHT:
                        step_run = run
    other_run = factories.run_create(
        team=other_team, accelerator_type=h100, model=OTHER_MODEL, host=other_host, started_at=end
    )
    for run in [*runs, other_run]:
        run_cost_compute(run=run)

    assert latest is not None and step_run is not None and fp8_latest is not None
    series = Series.objects.get(
        team=team,
        metric="throughput_tokens_per_s",
        workload__variant__name="bf16",
        accelerator_type=h100,
    )
    # The product's detector replays the series as if each run had just landed: it opens the alert.
    alerts_history_check(series_ids=[series.pk])
    alert = Alert.objects.get(series=series)
    other_alert = factories.alert_create(team=other_team, title=f"{OTHER_MODEL} latency up 9%")
    return World(
        team=team,
        other_team=other_team,
        h100_host=h100_host,
        l4_host=l4_host,
        other_host=other_host,
        run=latest,
        fp8_run=fp8_latest,
        step_run=step_run,
        other_run=other_run,
        alert=alert,
        other_alert=other_alert,
        series=series,
        model_id=latest.workload.variant.model_id,
        month=days[-2].replace(day=1),
        type_names=[h100.name, l4.name],
    )
