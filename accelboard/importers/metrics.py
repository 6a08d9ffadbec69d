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

# Families read by the importers (accelboard/importers): every statistic the tools write for a
# latency-like quantity, so that names stay stable across tools (p999 = 99.9th percentile).
_LATENCY_FAMILIES = {
    "latency": "latency",
    "ttft": "time to first token",
    "itl": "inter-token latency",
    "tpot": "time per output token",
    "decode_latency": "decode step latency",
}
_STATS = {
    "mean": "Mean",
    "min": "Min",
    "max": "Max",
    "std": "Std dev of",
    "p25": "p25",
    "p50": "p50",
    "p75": "p75",
    "p90": "p90",
    "p95": "p95",
    "p97": "p97",
    "p99": "p99",
    "p999": "p99.9",
}
_KNOWN = {spec.name for spec in _SPECS}
for _family, _label in _LATENCY_FAMILIES.items():
    for _stat, _stat_label in _STATS.items():
        _name = f"{_family}_{_stat}_ms"
        if _name not in _KNOWN:
            _SPECS.append(MetricSpec(_name, "ms", "lower", f"{_stat_label} {_label}"))

_SPECS += [
    MetricSpec("throughput_total_tokens_per_s", "tokens/s", "higher", "Input + output tokens per second"),
    MetricSpec("throughput_input_tokens_per_s", "tokens/s", "higher", "Input tokens per second"),
    MetricSpec("throughput_prefill_tokens_per_s", "tokens/s", "higher", "Prefill tokens per second"),
    MetricSpec("throughput_ops_per_s", "ops/s", "higher", "Calls per second"),
    MetricSpec("goodput_requests_per_s", "requests/s", "higher", "Requests per second meeting SLOs"),
    MetricSpec("output_tokens_per_s_per_user_mean", "tokens/s", "higher", "Mean output tokens/s per request"),
    MetricSpec("error_rate", "ratio", "lower", "Failed requests / requests"),
    MetricSpec("load_time_ms", "ms", "lower", "Model load time"),
    MetricSpec("memory_allocated_peak_bytes", "bytes", "lower", "Peak allocated memory"),
    MetricSpec("memory_reserved_peak_bytes", "bytes", "lower", "Peak reserved memory"),
    MetricSpec("memory_ram_peak_bytes", "bytes", "lower", "Peak host RAM"),
    MetricSpec("power_cpu_avg_w", "W", "lower", "Average CPU power"),
    MetricSpec("power_gpu_avg_w", "W", "lower", "Average GPU power"),
    MetricSpec("power_ram_avg_w", "W", "lower", "Average RAM power"),
    MetricSpec("power_max_w", "W", "lower", "Peak power"),
    MetricSpec("energy_cpu_j", "J", "lower", "CPU energy"),
    MetricSpec("energy_gpu_j", "J", "lower", "GPU energy"),
    MetricSpec("energy_ram_j", "J", "lower", "RAM energy"),
    MetricSpec("samples_per_j", "samples/J", "higher", "Energy efficiency (samples per joule)"),
    MetricSpec("emissions_gco2e", "gCO2e", "lower", "Carbon emissions"),
    MetricSpec("gpu_util_avg_pct", "%", "higher", "Average GPU utilisation"),
    MetricSpec("memory_used_peak_bytes", "bytes", "lower", "Peak GPU memory used"),
    MetricSpec("temperature_max_c", "°C", "lower", "Peak GPU temperature"),
]

METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}

# Accuracy figures are one series per task and metric: ``accuracy:<task>:<metric>``
# (lm-evaluation-harness ``arc_easy`` / ``acc_norm``, MLPerf ``llama2-70b-99`` / ``rouge1``).
# Most are higher-is-better; the importer states the direction where the tool says otherwise
# (perplexity, eval loss).
ACCURACY_PREFIX = "accuracy:"
_ACCURACY_SPEC = MetricSpec(ACCURACY_PREFIX, "score", "higher", "Accuracy")


def accuracy_metric_name(task: str, metric: str) -> str:
    return f"{ACCURACY_PREFIX}{task}:{metric}"


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
    "ops/s",
    "samples/J",
    "ratio",
    "°C",
    "MHz",
}


# Units of quantities that cannot be below zero (a rate, a duration, an amount); a score, a
# percentage change, a ratio or a temperature may be.
NON_NEGATIVE_UNITS = frozenset(
    {"samples/s", "tokens/s", "requests/s", "ms", "s", "W", "J", "kWh", "bytes", "gCO2e", "count",
     "ops/s", "samples/J", "MHz"}
)  # fmt: skip


def metric_spec(name: str) -> MetricSpec | None:
    spec = METRICS.get(name)
    if spec is None and name.startswith(ACCURACY_PREFIX) and len(name) > len(ACCURACY_PREFIX):
        return MetricSpec(name, _ACCURACY_SPEC.unit, _ACCURACY_SPEC.direction, name[len(ACCURACY_PREFIX) :])
    return spec


def metric_label(name: str) -> str:
    """What people read for a metric: its spec's label ("p99 TTFT"), else the name with spaces."""
    spec = metric_spec(name)
    return spec.label if spec else name.replace("_", " ")
