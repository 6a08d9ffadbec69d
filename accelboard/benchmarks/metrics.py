"""The catalogue of benchmark metrics accelboard understands: canonical name, unit, direction.

Pure data, no ORM. Units are normalised on input (latency ms, throughput per second, power W,
energy J, memory bytes, accuracy as a fraction or score) and every metric has a direction so
that a regression is always "worse", whichever way the number moved.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    direction: str  # "higher" or "lower"
    label: str


_SPECS = [
    MetricSpec("throughput_samples_per_s", "samples/s", "higher", "Throughput"),
    MetricSpec("throughput_tokens_per_s", "tokens/s", "higher", "Output tokens per second"),
    MetricSpec("throughput_requests_per_s", "requests/s", "higher", "Requests per second"),
    MetricSpec("latency_mean_ms", "ms", "lower", "Mean latency"),
    MetricSpec("latency_p50_ms", "ms", "lower", "p50 latency"),
    MetricSpec("latency_p90_ms", "ms", "lower", "p90 latency"),
    MetricSpec("latency_p99_ms", "ms", "lower", "p99 latency"),
    MetricSpec("ttft_p50_ms", "ms", "lower", "p50 time to first token"),
    MetricSpec("ttft_p99_ms", "ms", "lower", "p99 time to first token"),
    MetricSpec("itl_p50_ms", "ms", "lower", "p50 inter-token latency"),
    MetricSpec("itl_p99_ms", "ms", "lower", "p99 inter-token latency"),
    MetricSpec("tpot_p50_ms", "ms", "lower", "p50 time per output token"),
    MetricSpec("power_avg_w", "W", "lower", "Average power"),
    MetricSpec("energy_j", "J", "lower", "Energy"),
    MetricSpec("energy_per_inference_j", "J", "lower", "Energy per inference"),
    MetricSpec("energy_per_token_j", "J", "lower", "Energy per token"),
    MetricSpec("memory_peak_bytes", "bytes", "lower", "Peak memory"),
    MetricSpec("accuracy", "score", "higher", "Accuracy"),
    MetricSpec("time_to_train_s", "s", "lower", "Time to train"),
    MetricSpec("wall_time_s", "s", "lower", "Wall time"),
]

METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}

UNITS = {
    "samples/s",
    "tokens/s",
    "requests/s",
    "ms",
    "s",
    "W",
    "J",
    "kWh",
    "bytes",
    "score",
    "%",
    "gCO2e",
    "count",
}


def metric_spec(name: str) -> MetricSpec | None:
    return METRICS.get(name)
