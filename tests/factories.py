"""Plain functions that make test data through the same write paths the product uses.

Hosts and GPUs go through ``fleet.host_services.host_register`` (UUID keyed), raw telemetry through
``telemetry_partitions_ensure`` + binary ``telemetry_copy`` (as the ingest API does) and benchmark
runs through ``benchmarks.services.run_record``. Telemetry is generated with a seeded numpy
generator so a test can recompute what it expects from the arrays it is handed back.
"""

from __future__ import annotations

import itertools
import uuid as uuid_lib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.fleet.host_services import host_register
from accelboard.fleet.models import TELEMETRY_COLUMNS, Accelerator, AcceleratorType, Host
from accelboard.fleet.partition_services import telemetry_copy, telemetry_partitions_ensure
from accelboard.fleet.rollup_services import telemetry_rollups_refresh
from accelboard.importers.metrics import METRICS

_counter = itertools.count(1)

# Driver-reported names, as NVML writes them, for the types tests usually need.
H100 = {
    "name": "H100 SXM 80GB",
    "slug": "h100-sxm-80gb",
    "match_names": ["H100 80GB HBM3"],
    "driver_name": "NVIDIA H100 80GB HBM3",
    "board_power_w": 700.0,
    "memory_bytes": 85_520_809_984,
}
L4 = {
    "name": "L4",
    "slug": "l4",
    "match_names": ["NVIDIA L4"],
    "driver_name": "NVIDIA L4",
    "board_power_w": 72.0,
    "memory_bytes": 24_152_899_584,
}


def accelerator_type_create(
    *,
    name: str = H100["name"],
    slug: str | None = None,
    match_names: list[str] | None = None,
    board_power_w: float | None = 700.0,
    memory_bytes: int | None = None,
    architecture: str = "",
) -> AcceleratorType:
    accel_type, _ = AcceleratorType.objects.get_or_create(
        name=name,
        defaults={
            "slug": slug or name.lower().replace(" ", "-"),
            "match_names": list(match_names or []),
            "board_power_w": board_power_w,
            "memory_bytes": memory_bytes,
            "architecture": architecture,
        },
    )
    return accel_type


def accelerator_type_from(spec: dict[str, Any]) -> AcceleratorType:
    """One of the preset dicts above (``H100``, ``L4``) as a row."""
    return accelerator_type_create(
        name=spec["name"],
        slug=spec["slug"],
        match_names=spec["match_names"],
        board_power_w=spec["board_power_w"],
        memory_bytes=spec["memory_bytes"],
    )


def host_create(
    *,
    team: Team | None,
    gpus: int = 2,
    gpu_name: str = H100["driver_name"],
    hostname: str | None = None,
    memory_bytes: int | None = H100["memory_bytes"],
    power_limit_w: float | None = 700.0,
    seen_at: datetime | None = None,
) -> tuple[Host, list[Accelerator]]:
    """A host with ``gpus`` GPUs of one driver name, registered by UUID; GPUs in index order.

    The GPU's accelerator type is found by ``host_register`` from ``gpu_name``, so create the
    type first when the test needs it matched.
    """
    n = next(_counter)
    hostname = hostname or f"gpu-node-{n:03d}"
    accelerators = [
        {
            "uuid": f"GPU-{uuid_lib.uuid4()}",
            "index": index,
            "name": gpu_name,
            "serial": f"SN{n:04d}{index:02d}",
            "memory_bytes": memory_bytes,
            "power_limit_w": power_limit_w,
            "driver_version": "550.54.15",
        }
        for index in range(gpus)
    ]
    host, by_uuid = host_register(
        hostname=hostname,
        team_id=team.pk if team is not None else None,
        facts={"driver_version": "550.54.15", "cuda_version": "12.4", "agent_version": "0.1.0"},
        accelerators=accelerators,
        seen_at=seen_at,
    )
    return host, [by_uuid[item["uuid"]] for item in accelerators]


@dataclass
class TelemetryBatch:
    """What ``telemetry_load`` wrote, as arrays a test can recompute expectations from."""

    times: list[datetime]
    gpu_ids: np.ndarray  # accelerator id per row
    power_w: np.ndarray
    gpu_util: np.ndarray
    energy_mj: np.ndarray
    rows: int


def telemetry_load(
    *,
    gpus: list[Accelerator],
    start: datetime,
    end: datetime,
    interval_s: int = 60,
    util_mean: float = 60.0,
    power_w: float = 400.0,
    seed: int = 7,
) -> TelemetryBatch:
    """Raw samples for each GPU every ``interval_s`` in [start, end), copied like the ingest path.

    Power and utilisation are noisy around the given means (clipped to physical ranges); the
    energy counter is the running integral of power in mJ, so counter and power agree.
    """
    rng = np.random.default_rng(seed)
    steps = int((end - start).total_seconds() // interval_s)
    if steps <= 0:
        raise ValueError("telemetry_load needs end after start by at least one interval")
    offsets = np.arange(steps) * interval_s
    times = [start + timedelta(seconds=int(s)) for s in offsets]
    all_gpu, all_power, all_util, all_energy = [], [], [], []
    rows: list[tuple[object, ...]] = []
    for gpu in gpus:
        util = np.clip(rng.normal(util_mean, 10.0, steps), 0.0, 100.0)
        power = np.clip(rng.normal(power_w, 25.0, steps), 30.0, None)
        # Counter starts at an arbitrary value since driver load, as real ones do.
        energy = (1_000_000 + np.cumsum(power * interval_s * 1000.0)).astype(np.int64)
        for i, moment in enumerate(times):
            row = {
                "time": moment,
                "host_id": gpu.host_id,
                "accelerator_id": gpu.pk,
                "power_w": float(power[i]),
                "energy_mj": int(energy[i]),
                "gpu_util": float(util[i]),
                "mem_util": float(util[i] / 2),
                "mem_used_bytes": 40 * 2**30,
                "mem_total_bytes": 80 * 2**30,
                "sm_clock_mhz": 1980.0,
                "mem_clock_mhz": 2619.0,
                "temperature_c": 55.0,
                "throttle_reasons": 0,
                "ecc_errors": 0,
                "xid_errors": 0,
            }
            rows.append(tuple(row[column] for column in TELEMETRY_COLUMNS))
        all_gpu.append(np.full(steps, gpu.pk))
        all_power.append(power)
        all_util.append(util)
        all_energy.append(energy)
    telemetry_partitions_ensure(start=start, end=times[-1])
    count = telemetry_copy(rows=rows)
    return TelemetryBatch(
        times=times,
        gpu_ids=np.concatenate(all_gpu),
        power_w=np.concatenate(all_power),
        gpu_util=np.concatenate(all_util),
        energy_mj=np.concatenate(all_energy),
        rows=count,
    )


def telemetry_days_load(
    *,
    gpus: list[Accelerator],
    days: int = 3,
    interval_s: int = 300,
    now: datetime | None = None,
    **kwargs: Any,
) -> TelemetryBatch:
    """``days`` of telemetry ending at the last full hour before ``now``, with rollups refreshed."""
    now = now or datetime.now(UTC)
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    batch = telemetry_load(gpus=gpus, start=start, end=end, interval_s=interval_s, **kwargs)
    telemetry_rollups_refresh(start=start, end=end)
    return batch


def run_create(
    *,
    team: Team,
    accelerator_type: AcceleratorType | None = None,
    accelerator_count: int = 1,
    started_at: datetime | None = None,
    model: str = "Llama-3.1-8B",
    variant: str = "bf16",
    precision: str = "bf16",
    batch_size: int = 64,
    metrics: dict[str, float] | None = None,
    git_commit: str = "",
    host: Host | None = None,
    scenario: str = "offline",
) -> BenchmarkRun:
    """One benchmark run with catalogue metrics (throughput and p99 latency by default)."""
    variant_obj = model_variant_get_or_create(model=model, variant=variant, precision=precision)
    workload = workload_get_or_create(
        team=team, variant=variant_obj, spec=WorkloadSpec(scenario=scenario, batch_size=batch_size)
    )
    values = metrics or {"throughput_tokens_per_s": 4890.0, "latency_p99_ms": 41.5}
    run, _ = run_record(
        team=team,
        workload=workload,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        started_at=started_at or datetime.now(UTC) - timedelta(hours=1),
        metrics=[
            MetricInput(name=name, value=value, unit=METRICS[name].unit) for name, value in values.items()
        ],
        host=host,
        git_commit=git_commit or f"{next(_counter):040x}",
        branch="main",
    )
    return run


def alert_create(
    *,
    team: Team,
    severity: str = "warning",
    state: str = "open",
    kind: str = "regression",
    title: str = "",
    opened_at: datetime | None = None,
) -> Alert:
    """An alert row as a detector would leave it (the detectors' own services are tested apart)."""
    n = next(_counter)
    return Alert.objects.create(
        team=team,
        kind=kind,
        severity=severity,
        state=state,
        title=title or f"Throughput down 12% on series {n}",
        dedupe_key=f"test:{n}",
        opened_at=opened_at or datetime.now(UTC),
    )
