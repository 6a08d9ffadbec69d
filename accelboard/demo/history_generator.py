"""The demo's history in numbers: nightly benchmark runs, served-model metrics, the manifest.

Pure functions of a ``DemoConfig`` and the fleet ``accelboard.demo.generator`` plans, with the same
rules (no ORM, no clock, no global RNG; each benchmark configuration and served model draws from
its own seeded generator).

4. ``benchmark_runs``: one run per night per configuration with repeated samples per metric,
   1-3% noise, the injected regressions, recoveries and the outlier, and the int4 accuracy drift.
5. ``serving_metrics``: 5-minute vLLM/TensorRT-LLM intervals for the served LLMs, following the
   same daily curve as their hosts' GPU load.
6. ``manifest``: every injected event, machine-readable, for detection tests to check against.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from accelboard.importers.metrics import METRICS

from . import benchmark_plan, serving_plan
from .generator import (
    DAY,
    DemoConfig,
    HostPlan,
    TelemetryEvents,
    _rng,
    serving_curve,
)

# --- 4. Benchmarks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricRow:
    name: str
    unit: str
    direction: str
    value: float
    samples: tuple[float, ...]


@dataclass(frozen=True)
class RunRow:
    config: str
    day: int
    uuid: str
    started_at: datetime
    finished_at: datetime
    git_commit: str
    hostname: str | None
    metrics: tuple[MetricRow, ...]
    events: tuple[str, ...]  # ids of the injected events that start or end on this run


def _is_llm(bench: dict[str, Any]) -> bool:
    return bench["workload"].get("output_length") is not None


def bench_metric_names(bench: dict[str, Any]) -> list[str]:
    throughput = "throughput_tokens_per_s" if _is_llm(bench) else "throughput_samples_per_s"
    names = [throughput, "latency_p50_ms", "latency_p99_ms", "power_avg_w", "energy_per_inference_j"]
    if _is_llm(bench):
        names.append("energy_per_token_j")
    return [*names, "memory_peak_bytes", "accuracy"]


def run_day_start(config: DemoConfig, day: int) -> datetime:
    """Midnight UTC of run ``day``; the last night's runs finish at least an hour before ``now``."""
    last = (config.now.astimezone(UTC) - timedelta(hours=3)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    return last - timedelta(days=config.days_runs - 1 - day)


def _event_days(config: DemoConfig, event: dict[str, Any]) -> tuple[int, int | None]:
    start = max(2, int(round(event["at"] * (config.days_runs - 1))))
    days = event.get("days")
    end = start + days if days is not None and start + days < config.days_runs else None
    return start, end


def _host_for(bench: dict[str, Any], hosts: list[HostPlan]) -> str | None:
    """Where the nightly job runs: a host of the team with that GPU, else any such host."""
    fits = [host for host in hosts if host.gpu == bench["gpu"] and len(host.gpus) >= bench["count"]]
    own = [host for host in fits if host.team == bench["team"]]
    chosen = next(iter(own or fits), None)
    return chosen.hostname if chosen else None


def _commit(config: DemoConfig, team: str, day: int) -> str:
    return hashlib.sha1(f"{config.seed}:{team}:{day}".encode()).hexdigest()


def benchmark_runs(config: DemoConfig, hosts: list[HostPlan]) -> list[RunRow]:
    """Every nightly run of every configuration, oldest first within each configuration."""
    D = config.days_runs
    days = np.arange(D)
    runs: list[RunRow] = []
    for position, bench in enumerate(benchmark_plan.BENCHMARKS):
        rng = _rng(config, "bench", bench["key"])
        throughput, p50, power, memory_gib, accuracy = bench["base"]
        output_length = bench["workload"].get("output_length") or 1
        names = bench_metric_names(bench)
        truth = {
            names[0]: np.full(D, throughput),
            "latency_p50_ms": np.full(D, p50),
            "latency_p99_ms": np.full(D, p50 * (1.6 if _is_llm(bench) else 1.35)),
            "power_avg_w": np.full(D, power),
            "energy_per_inference_j": np.full(D, power / throughput * output_length),
            "energy_per_token_j": np.full(D, power / throughput),
            "memory_peak_bytes": np.full(D, memory_gib * 2**30),
            "accuracy": np.full(D, accuracy),
        }
        marks: dict[int, list[str]] = {}
        for event in benchmark_plan.BENCH_EVENTS:
            if event["config"] != bench["key"]:
                continue
            start, end = _event_days(config, event)
            active = (days >= start) & (days < (end if end is not None else D))
            for metric, change in event["changes"].items():
                truth[metric] = truth[metric] * np.where(active, 1 + change, 1.0)
            marks.setdefault(start, []).append(event["id"])
            if end is not None:
                marks.setdefault(end, []).append(event["id"])
        if benchmark_plan.DRIFT_EVENT["config"] == bench["key"]:
            start, _ = _event_days(config, benchmark_plan.DRIFT_EVENT)
            slide = 1 + benchmark_plan.DRIFT_EVENT["per_day"] * np.clip(days - start, 0, None)
            truth["accuracy"] = truth["accuracy"] * slide
            marks.setdefault(start, []).append(benchmark_plan.DRIFT_EVENT["id"])

        values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name in names:
            noise_key = (
                "throughput"
                if name.startswith("throughput")
                else "energy"
                if name.startswith("energy")
                else name
            )
            width = 1 if name == "accuracy" else benchmark_plan.SAMPLES_PER_METRIC
            samples = truth[name][:, None] * (1 + rng.normal(0, benchmark_plan.NOISE[noise_key], (D, width)))
            if name == "memory_peak_bytes":
                samples = np.round(samples)
                value = samples.max(axis=1)  # a peak is the largest repeat
            else:
                samples = np.round(samples, 6 if name in {"accuracy", "energy_per_token_j"} else 4)
                value = np.round(samples.mean(axis=1), 6)
            values[name] = (value, samples)
        run_uuids = [uuid.UUID(bytes=rng.bytes(16), version=4) for _ in range(D)]
        durations = rng.uniform(8, 25, D)
        hostname = _host_for(bench, hosts)
        for day in range(D):
            started = run_day_start(config, day) + timedelta(hours=1, minutes=3 * position)
            metrics = tuple(
                MetricRow(
                    name=name,
                    unit=METRICS[name].unit,
                    direction=METRICS[name].direction,
                    value=float(values[name][0][day]),
                    samples=tuple(float(x) for x in values[name][1][day]),
                )
                for name in names
            )
            runs.append(
                RunRow(
                    config=bench["key"],
                    day=day,
                    uuid=str(run_uuids[day]),
                    started_at=started,
                    finished_at=started + timedelta(minutes=float(durations[day])),
                    git_commit=_commit(config, bench["team"], day),
                    hostname=hostname,
                    metrics=metrics,
                    events=tuple(marks.get(day, [])),
                )
            )
    return runs


# --- 5. Serving ---------------------------------------------------------------------------------


@dataclass
class ServingSeries:
    hostname: str
    team: str
    model: str
    variant: str
    engine: str
    gpu_uuids: list[str]
    epochs: np.ndarray
    columns: dict[str, np.ndarray]


def serving_metrics(
    config: DemoConfig, hosts: list[HostPlan], events: TelemetryEvents
) -> list[ServingSeries]:
    """Per-interval counts and latency percentiles of each served LLM whose host is in the fleet."""
    by_name = {host.hostname: host for host in hosts}
    step = config.serving_interval_s
    end = int(config.now.timestamp()) // step * step
    epochs = np.arange(end - config.days_telemetry * DAY, end, step, dtype=np.int64)
    result = []
    for deployment in serving_plan.SERVING:
        host = by_name.get(deployment["host"])
        if host is None:
            continue
        rng = _rng(config, "serving", deployment["host"], deployment["model"], deployment["variant"])
        curve = serving_curve(epochs + step // 2, host.tz_hours)
        # Traffic growth: the level at ``now`` is the plan's, earlier intervals had less.
        growth = (1 + deployment.get("growth_per_month", 0.0)) ** ((epochs - end) / (DAY * 365.25 / 12))
        requests = rng.poisson(deployment["peak_rps"] * curve * growth * step)
        hot = (epochs + step > events.throttle_start) & (epochs < events.throttle_end)
        slow = np.where(hot & (host.hostname == events.throttle_host), 1.5, 1.0)
        error_rate = np.where(slow > 1, 0.02, 0.002)
        errors = rng.binomial(requests, error_rate)
        prompt = np.round(requests * deployment["prompt"] * rng.lognormal(0, 0.05, epochs.size)).astype(
            np.int64
        )
        generated = np.round(requests * deployment["output"] * rng.lognormal(0, 0.05, epochs.size)).astype(
            np.int64
        )
        pressure = 1 + 1.5 * curve**2
        ttft_p50 = deployment["ttft_ms"] * pressure * slow * rng.lognormal(0, 0.05, epochs.size)
        ttft_p99 = ttft_p50 * (3.0 + curve) * rng.lognormal(0, 0.08, epochs.size)
        itl_p50 = deployment["itl_ms"] * (1 + 0.6 * curve) * slow * rng.lognormal(0, 0.03, epochs.size)
        itl_p99 = itl_p50 * 2.5 * rng.lognormal(0, 0.06, epochs.size)
        e2e_p50 = ttft_p50 + itl_p50 * deployment["output"]
        e2e_p99 = ttft_p99 + itl_p99 * deployment["output"] * 1.4
        result.append(
            ServingSeries(
                hostname=host.hostname,
                team=host.team,
                model=deployment["model"],
                variant=deployment["variant"],
                engine=deployment["engine"],
                gpu_uuids=[host.gpus[i].uuid for i in deployment["gpus"] if i < len(host.gpus)],
                epochs=epochs,
                columns={
                    "requests": requests.astype(np.int64),
                    "errors": errors.astype(np.int64),
                    "prompt_tokens": prompt,
                    "generated_tokens": generated,
                    "ttft_p50_ms": np.round(ttft_p50, 2),
                    "ttft_p99_ms": np.round(ttft_p99, 2),
                    "itl_p50_ms": np.round(itl_p50, 3),
                    "itl_p99_ms": np.round(itl_p99, 3),
                    "e2e_p50_ms": np.round(e2e_p50, 1),
                    "e2e_p99_ms": np.round(e2e_p99, 1),
                },
            )
        )
    return result


# --- 6. Manifest --------------------------------------------------------------------------------


def _series_key(bench: dict[str, Any], metric: str) -> dict[str, Any]:
    return {
        "config": bench["key"],
        "team": bench["team"],
        "model": bench["model"],
        "variant": bench["variant"],
        "accelerator": bench["gpu"],
        "count": bench["count"],
        "metric": metric,
        "direction": METRICS[metric].direction,
    }


def manifest(
    config: DemoConfig, hosts: list[HostPlan], runs: list[RunRow], events: TelemetryEvents
) -> dict[str, Any]:
    """Every injected event: which series (or host/GPU), from which day or time, how large."""
    benches = {bench["key"]: bench for bench in benchmark_plan.BENCHMARKS}
    run_at = {(run.config, run.day): run for run in runs}
    entries = []
    for event in [*benchmark_plan.BENCH_EVENTS, benchmark_plan.DRIFT_EVENT]:
        bench = benches[event["config"]]
        start, end = _event_days(config, event)
        first = run_at[(bench["key"], start)]
        entry: dict[str, Any] = {
            "id": event["id"],
            "kind": event["kind"],
            "description": event["description"],
            "start_day": start,
            "start_date": first.started_at.date().isoformat(),
            "first_run_uuid": first.uuid,
            "git_commit": first.git_commit,
        }
        if event["kind"] == "drift":
            entry["per_day_pct"] = event["per_day"] * 100
            entry["series"] = [_series_key(bench, event["metric"])]
            entry["end_day"] = None
        else:
            entry["series"] = [
                {**_series_key(bench, metric), "pct": round(change * 100, 3)}
                for metric, change in event["changes"].items()
            ]
            entry["end_day"] = end
            entry["recovery_run_uuid"] = run_at[(bench["key"], end)].uuid if end is not None else None
            entry["expect_alert"] = event["kind"] == "regression"
        entries.append(entry)
    return {
        "config": config.as_dict(),
        "benchmark_events": entries,
        "telemetry_events": events.as_manifest(hosts),
    }
