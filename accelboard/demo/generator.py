"""The demo fleet's numbers: pure functions of a ``DemoConfig``, no ORM, no clock, no global RNG.

Same config (seed, sizes and ``now``) => identical arrays and rows. Each host, benchmark
configuration and served model draws from its own generator seeded with (seed, a hash of its
name), so adding hosts or changing one size does not reshuffle everything else.

1. ``fleet_plan``: hosts and GPUs (stable fake UUIDs, NVML names, serials) from ``plan.HOST_TEMPLATES``.
2. ``telemetry_events``: where the injected telemetry events fall (energy-counter reset on one GPU,
   thermal throttling on one host, a two-hour agent outage on another).
3. ``host_telemetry``: per-GPU samples every ``telemetry_interval_s``, vectorised with numpy over
   (GPUs × samples): load from the host's profile and local time, power from load and board power,
   an energy counter (mJ) that integrates power (trapezoid, ±0.5% meter noise), memory,
   temperature, clocks and NVML clocks-event reasons (0x1 idle, 0x4 power cap, 0x20|0x40 thermal).
4.-6. The benchmark runs, the serving metrics and the manifest of injected events:
   ``accelboard.demo.history_generator``, from the fleet planned here.
"""

from __future__ import annotations

import hashlib
import uuid
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from accelboard.fleet.catalogue import ACCELERATOR_TYPES

from . import plan

DAY = 86400
_TYPES = {entry["slug"]: entry for entry in ACCELERATOR_TYPES}
THROTTLE_IDLE = 0x1
THROTTLE_POWER_CAP = 0x4
THROTTLE_THERMAL = 0x20 | 0x40  # SW thermal slowdown | HW thermal slowdown


# 60 s, as an agent would sample: 85 GPUs x 14 days (1.7M samples) load in ~96 s on a 2-core
# machine (measured twice, light load; rollups 57 s, raw COPY 18 s, commit 1 s) since the rollup
# refresh reads a range by time, sorts it once and the rollup tables dropped their deferred
# foreign-key checks. Before that it took 220 s and the default was 180 s. Heavy contention from
# other jobs can still push it past two minutes: ``--telemetry-interval 180`` loads a third.
# The default became 31 days (a month of costs): 3.8M samples, 216 s with other jobs running.
DEFAULT_TELEMETRY_INTERVAL_S = 60


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo. ``now`` is passed in (the command reads the clock), never read here."""

    now: datetime
    seed: int = 7
    hosts: int = plan.DEFAULT_HOSTS
    days_runs: int = 90
    # A month, so that the finance pages show a month of spend (and the overview a month so far).
    days_telemetry: int = 31
    telemetry_interval_s: int = DEFAULT_TELEMETRY_INTERVAL_S
    serving_interval_s: int = 300

    def __post_init__(self) -> None:
        if self.now.tzinfo is None:
            raise ValueError("now: must carry a timezone")
        limits = {
            "hosts": (1, 500),
            "days_runs": (10, 3650),
            "days_telemetry": (1, 60),
            "telemetry_interval_s": (10, 3600),
            "serving_interval_s": (60, 3600),
        }
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name}: must be between {low} and {high}, not {value}")
        for name in ("telemetry_interval_s", "serving_interval_s"):
            if DAY % getattr(self, name):
                raise ValueError(f"{name}: must divide a day (86400 s) evenly, not {getattr(self, name)}")

    @property
    def telemetry_end(self) -> int:
        """Epoch seconds, exclusive: ``now`` floored to the sampling interval."""
        epoch = int(self.now.timestamp())
        return epoch - epoch % self.telemetry_interval_s

    @property
    def telemetry_start(self) -> int:
        return self.telemetry_end - self.days_telemetry * DAY

    def as_dict(self) -> dict[str, Any]:
        return {
            "now": self.now.astimezone(UTC).isoformat(),
            "seed": self.seed,
            "hosts": self.hosts,
            "days_runs": self.days_runs,
            "days_telemetry": self.days_telemetry,
            "telemetry_interval_s": self.telemetry_interval_s,
            "serving_interval_s": self.serving_interval_s,
        }


def _rng(config: DemoConfig, *names: str) -> np.random.Generator:
    return np.random.default_rng([config.seed, *(zlib.crc32(name.encode()) for name in names)])


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


# --- 1. The fleet -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuPlan:
    uuid: str
    index: int
    name: str
    serial: str
    memory_bytes: int
    power_limit_w: float


@dataclass(frozen=True)
class HostPlan:
    hostname: str
    team: str
    site: str
    provider: str
    region: str
    tz_hours: int
    instance_type: str
    gpu: str  # accelerator type slug
    profile: str
    driver_version: str
    cuda_version: str
    gpus: tuple[GpuPlan, ...]


def fleet_plan(config: DemoConfig) -> list[HostPlan]:
    """The first ``config.hosts`` hosts; templates repeat with the next number past the list."""
    sites = {site["key"]: site for site in plan.SITES}
    numbers: dict[str, int] = {}
    hosts = []
    for position in range(config.hosts):
        template = plan.HOST_TEMPLATES[position % len(plan.HOST_TEMPLATES)]
        numbers[template["prefix"]] = numbers.get(template["prefix"], 0) + 1
        hostname = f"{template['prefix']}-{numbers[template['prefix']]:02d}"
        site = sites[template["site"]]
        kind = plan.GPU_KINDS[template["gpu"]]
        accel = _TYPES[template["gpu"]]
        gpus = []
        for index in range(template["gpus"]):
            # Stable across runs and sizes: a function of the seed, the hostname and the slot only.
            digest = hashlib.sha256(f"{config.seed}:{hostname}:{index}".encode()).digest()
            gpus.append(
                GpuPlan(
                    uuid=f"GPU-{uuid.UUID(bytes=digest[:16], version=4)}",
                    index=index,
                    name=kind["driver_name"],
                    serial=str(int.from_bytes(digest[16:24], "big") % 10**13).zfill(13),
                    memory_bytes=int(accel["memory_bytes"]),
                    power_limit_w=float(accel["board_power_w"]),
                )
            )
        amd = accel["vendor"] == "amd"
        hosts.append(
            HostPlan(
                hostname=hostname,
                team=template["team"],
                site=site["key"],
                provider=site["provider"],
                region=site["region"],
                tz_hours=int(site["tz_hours"]),
                instance_type=template["instance_type"],
                gpu=template["gpu"],
                profile=template["profile"],
                driver_version="6.8.5" if amd else "550.54.15",
                cuda_version="rocm-6.2" if amd else "12.4",
                gpus=tuple(gpus),
            )
        )
    return hosts


# --- 2. Telemetry events ------------------------------------------------------------------------


@dataclass(frozen=True)
class TelemetryEvents:
    throttle_host: str
    throttle_start: int  # epoch seconds
    throttle_end: int
    reset_host: str
    reset_gpu_index: int
    reset_time: int
    gap_host: str
    gap_start: int
    gap_end: int

    def as_manifest(self, hosts: list[HostPlan]) -> list[dict[str, Any]]:
        by_name = {host.hostname: host for host in hosts}
        reset_gpu = by_name[self.reset_host].gpus[self.reset_gpu_index]
        return [
            {
                "id": "energy-counter-reset",
                "kind": "counter_reset",
                "host": self.reset_host,
                "gpu_uuid": reset_gpu.uuid,
                "time": _iso(self.reset_time),
                "description": "Driver reload: the energy counter restarts near 0 at this sample",
            },
            {
                "id": "thermal-throttle",
                "kind": "throttle",
                "host": self.throttle_host,
                "start": _iso(self.throttle_start),
                "end": _iso(self.throttle_end),
                "throttle_reasons": THROTTLE_THERMAL,
                "description": "Cooling fault: 88-92 °C, HW/SW thermal slowdown (0x40|0x20), SM clock -38%",
            },
            {
                "id": "agent-outage",
                "kind": "telemetry_gap",
                "host": self.gap_host,
                "start": _iso(self.gap_start),
                "end": _iso(self.gap_end),
                "description": "No samples for two hours: a gap stays a gap (no rows), never zeros",
            },
        ]


def telemetry_events(config: DemoConfig, hosts: list[HostPlan]) -> TelemetryEvents:
    interval = config.telemetry_interval_s
    start, end = config.telemetry_start, config.telemetry_end
    span = end - start

    def aligned(epoch: int) -> int:
        return epoch - (epoch - start) % interval

    throttle = hosts[0]
    # 13:00 local, three days before the end (or mid-window when the window is shorter).
    local_midnight = (end + throttle.tz_hours * 3600) // DAY * DAY - min(3, config.days_telemetry // 2) * DAY
    throttle_start = local_midnight + 13 * 3600 - throttle.tz_hours * 3600
    if not start <= throttle_start <= end - 3 * 3600:
        throttle_start = start + span // 2
    reset_host = hosts[1] if len(hosts) > 1 else hosts[0]
    gap_host = hosts[3] if len(hosts) > 3 else hosts[-1]
    gap_start = aligned(start + int(span * 0.3))
    return TelemetryEvents(
        throttle_host=throttle.hostname,
        throttle_start=aligned(throttle_start),
        throttle_end=aligned(throttle_start) + 3 * 3600,
        reset_host=reset_host.hostname,
        reset_gpu_index=3 % len(reset_host.gpus),
        reset_time=aligned(start + span // 2),
        gap_host=gap_host.hostname,
        gap_start=gap_start,
        gap_end=gap_start + 2 * 3600,
    )


# --- 3. Telemetry -------------------------------------------------------------------------------


def _local(epochs: np.ndarray, tz_hours: int) -> tuple[np.ndarray, np.ndarray]:
    """Local hour of day (float) and weekday (Monday = 0) of each epoch."""
    local = epochs + tz_hours * 3600
    hour = (local % DAY) / 3600.0
    weekday = ((local // DAY) + 3) % 7  # 1970-01-01 was a Thursday
    return hour, weekday


def serving_curve(epochs: np.ndarray, tz_hours: int) -> np.ndarray:
    """Share of peak traffic of a served model: lowest at 04:00 local, highest at 16:00, quieter weekends."""
    hour, weekday = _local(epochs, tz_hours)
    diurnal = 0.5 - 0.5 * np.cos(2 * np.pi * (hour - 4.0) / 24.0)
    return (0.12 + 0.85 * diurnal) * np.where(weekday >= 5, 0.65, 1.0)


def _host_load(host: HostPlan, epochs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Load in [0, 1] per GPU and sample, shape (gpus, samples); exactly 0 means idle."""
    g, n = len(host.gpus), len(epochs)
    hour_index = (epochs - epochs[0]) // 3600
    hours = int(hour_index[-1]) + 1
    if host.profile == "serving":
        per_gpu = 0.95 + 0.08 * rng.random((g, 1))
        load = serving_curve(epochs, host.tz_hours)[None, :] * per_gpu + rng.normal(0, 0.04, (g, n))
        return np.clip(load, 0.03, 1.0)
    if host.profile == "batch":
        # Each GPU runs its own hour-long jobs; a quarter of the hours nothing is queued.
        busy = rng.random((g, hours)) < 0.75
        return np.where(busy[:, hour_index], 0.92, 0.0)
    if host.profile == "training":
        # All GPUs together, in six-hour jobs; a checkpoint every 30 minutes stalls compute briefly.
        blocks = (hour_index // 6).astype(np.int64)
        busy = rng.random(int(blocks[-1]) + 1) < 0.85
        checkpoint = (epochs % 1800) < 120
        row = np.where(busy[blocks], np.where(checkpoint, 0.3, 0.97), 0.0)
        return np.repeat(row[None, :], g, axis=0)
    # office: working hours on weekdays, idle nights and weekends.
    hour, weekday = _local(epochs, host.tz_hours)
    working = (weekday < 5) & (hour >= 8) & (hour < 19)
    busy = rng.random((g, hours)) < 0.8
    level = 0.45 + 0.45 * rng.random((g, hours))
    return np.where(working[None, :] & busy[:, hour_index], level[:, hour_index], 0.0)


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` samples along axis 1 (shorter at the start); thermal lag."""
    csum = np.cumsum(values, axis=1)
    shifted = np.zeros_like(csum)
    shifted[:, window:] = csum[:, :-window]
    counts = np.minimum(np.arange(1, values.shape[1] + 1), window)
    return (csum - shifted) / counts


@dataclass
class HostTelemetry:
    """Samples of one host: ``epochs`` (n,) and each column (gpus, n), gap already removed."""

    hostname: str
    epochs: np.ndarray
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.epochs.size * next(iter(self.columns.values())).shape[0])


def host_telemetry(config: DemoConfig, host: HostPlan, events: TelemetryEvents) -> HostTelemetry:
    rng = _rng(config, "telemetry", host.hostname)
    interval = config.telemetry_interval_s
    epochs = np.arange(config.telemetry_start, config.telemetry_end, interval, dtype=np.int64)
    g, n = len(host.gpus), len(epochs)
    kind = plan.GPU_KINDS[host.gpu]
    tdp = float(_TYPES[host.gpu]["board_power_w"])
    total = float(_TYPES[host.gpu]["memory_bytes"])
    idle_w = float(kind["idle_w"])

    load = _host_load(host, epochs, rng)
    active = load > 0.01
    util = np.where(active, np.clip(100.0 * load + rng.normal(0, 3.0, (g, n)), 1.0, 100.0), 0.0)
    power = idle_w + (0.97 * tdp - idle_w) * (util / 100.0) ** 0.85 * (1 + rng.normal(0, 0.02, (g, n)))
    power = np.clip(power, 0.9 * idle_w, tdp)
    ratio = 0.7 if host.profile == "serving" else 0.45
    mem_util = np.where(active, np.clip(util * ratio + rng.normal(0, 2.0, (g, n)), 0.0, 100.0), 0.0)
    if host.profile == "serving":
        # vLLM pre-allocates 90% of memory for its KV cache while the server is up.
        mem_frac = 0.9 + rng.normal(0, 0.002, (g, n))
    else:
        mem_frac = np.where(active, 0.35 + 0.5 * load + rng.normal(0, 0.01, (g, n)), 0.006)
    mem_used = (np.clip(mem_frac, 0.0, 0.99) * total).astype(np.int64)
    sm_clock = np.where(
        active, kind["sm_max"] * (1 - 0.06 * util / 100.0) + rng.normal(0, 8.0, (g, n)), kind["sm_idle"]
    )
    mem_clock = np.where(active, kind["mem_clock"], kind["mem_idle"])
    throttle = np.where(active, 0, THROTTLE_IDLE) | np.where(power > 0.96 * tdp, THROTTLE_POWER_CAP, 0)

    if host.hostname == events.throttle_host:
        hot = (epochs >= events.throttle_start) & (epochs < events.throttle_end)
        power = np.where(hot[None, :], power * 0.78, power)
        sm_clock = np.where(hot[None, :] & active, kind["sm_max"] * 0.62, sm_clock)
        throttle = np.where(hot[None, :] & active, throttle | THROTTLE_THERMAL, throttle)
    temperature = _moving_average(30.0 + 45.0 * power / tdp, 5) + rng.normal(0, 0.6, (g, n))
    if host.hostname == events.throttle_host:
        temperature = np.where(hot[None, :] & active, 88.0 + 4.0 * rng.random((g, n)), temperature)

    # Energy counter: the integral of power (trapezoid between samples) with ±0.5% meter noise,
    # from an arbitrary value since the driver loaded.
    step_j = np.empty((g, n))
    step_j[:, 0] = 0.0
    step_j[:, 1:] = 0.5 * (power[:, 1:] + power[:, :-1]) * interval * (1 + rng.normal(0, 0.005, (g, n - 1)))
    energy = rng.uniform(2e9, 9e10, (g, 1)) + np.cumsum(step_j * 1000.0, axis=1)
    if host.hostname == events.reset_host:
        at = int(np.searchsorted(epochs, events.reset_time))
        gi = events.reset_gpu_index
        energy[gi, at:] = np.cumsum(step_j[gi, at:] * 1000.0)

    keep = np.ones(n, dtype=bool)
    if host.hostname == events.gap_host:
        keep = (epochs < events.gap_start) | (epochs >= events.gap_end)
    columns = {
        "power_w": power.astype(np.float32),
        "energy_mj": energy.astype(np.int64),
        "gpu_util": np.round(util).astype(np.float32),
        "mem_util": np.round(mem_util).astype(np.float32),
        "mem_used_bytes": mem_used,
        "mem_total_bytes": np.full((g, n), int(total), dtype=np.int64),
        "sm_clock_mhz": np.round(sm_clock).astype(np.float32),
        "mem_clock_mhz": mem_clock.astype(np.float32),
        "temperature_c": np.round(temperature).astype(np.float32),
        "throttle_reasons": throttle.astype(np.int64),
        "ecc_errors": np.zeros((g, n), dtype=np.int64),
        "xid_errors": np.zeros((g, n), dtype=np.int32),
    }
    return HostTelemetry(
        hostname=host.hostname,
        epochs=epochs[keep],
        columns={name: values[:, keep] for name, values in columns.items()},
    )
