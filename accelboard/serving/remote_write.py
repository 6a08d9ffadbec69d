"""vLLM's and Triton's Prometheus series, received by remote-write, as serving intervals (pure).

Remote-write delivers cumulative counters, one sample per series per scrape; an interval is the
delta of each series between two consecutive samples of it. The last sample of every series is
kept between requests (``SeriesState``, stored by ``remote_write_services``), so that a request
holding one sample per series still yields the interval since the previous request's.

1. ``serving_extract``: the request's ``vllm:*`` and ``nv_inference_*`` series (``VLLM`` and
   ``TRITON`` say which and what they mean) with their host, model, variant, deployment labels
   (``deployment_labels``: the allow-listed workload labels, e.g. ``track``) and role; a series
   without its model label or host, with a value NaN or ±Inf (the stale marker is dropped by the
   decoder) or a sample more than 5 minutes in the future, raises ``WriteRejected`` naming it.
2. ``series_deltas``: each sample newer than the series' state gives the delta since the previous
   sample. A value below the previous one is a reset (the server restarted): the new value is the
   delta, as Prometheus's ``increase`` counts it; a histogram whose one bucket reset is reset as
   a whole. A sample not newer than the state (out of order, or a request sent again) is ignored.
   A series' first sample is its baseline: it gives no interval; so is a sample over a day after
   the previous one (the inference API's longest interval).
3. ``parts_build``: the deltas summed per (host, engine, model, variant, interval start) into
   ``Part``s, which add up: the series of one scrape that Prometheus sends in two requests
   (shards, ``max_samples_per_send``) are each counted once, into the same interval. A part's
   labels are the deployment labels its series agree on (``labels_common``): two deployments of
   one variant on one host share the interval row, which then names neither.
4. ``interval_fields``: a part's counters, buckets and sums as the inference ingest's interval:
   p50/p99 from the interval's bucket deltas by ``histogram_quantile`` (linear interpolation
   inside the bucket holding the rank, as Prometheus's ``histogram_quantile``; a rank in the
   ``+Inf`` bucket gives the highest finite bound), else from a Triton summary's quantiles.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accelboard.fleet.remote_write import Series, WriteRejected, labels_text, refused_key
from accelboard.importers.hostnames import hostname_problem

# Signals whose latency percentiles are stored in the interval's columns (``<signal>_ms``).
PERCENTILE_SIGNALS = ("ttft", "itl", "e2e", "queue")


@dataclass(frozen=True)
class Role:
    """What a series gives: a ``counter`` (added to ``target``), a histogram's ``bucket``, ``sum``
    or ``count`` (of ``target``'s latency in seconds), or a summary's ``quantile``."""

    kind: str
    target: str
    scale: float = 1.0  # to seconds (a bucket bound, a sum) for latencies


def _histogram(base: str, signal: str, scale: float = 1.0) -> dict[str, Role]:
    return {
        f"{base}_bucket": Role("bucket", signal, scale),
        f"{base}_sum": Role("sum", signal, scale),
        f"{base}_count": Role("count", signal),
    }


# vLLM (model label ``model_name``). Requests: ``request_success_total`` is every finished
# request, by ``finished_reason``; the aborted ones are also the interval's errors.
VLLM: dict[str, Role] = {
    "vllm:prompt_tokens_total": Role("counter", "prompt_tokens"),
    "vllm:generation_tokens_total": Role("counter", "generated_tokens"),
    "vllm:request_success_total": Role("counter", "requests"),
    **_histogram("vllm:time_to_first_token_seconds", "ttft"),
    **_histogram("vllm:inter_token_latency_seconds", "itl"),
    **_histogram("vllm:time_per_output_token_seconds", "tpot"),  # older name of the ITL
    **_histogram("vllm:e2e_request_latency_seconds", "e2e"),
    **_histogram("vllm:request_queue_time_seconds", "queue"),
}
VLLM_ERROR_REASONS = frozenset({"abort"})

# Triton (labels ``model`` and ``version``; the versions of a model add up). Durations are
# cumulative microseconds: their deltas are ``latency_sums``' sums, the interval's successful
# requests their count (Triton's own average: duration / request_success).
_US = 1e-6
TRITON: dict[str, Role] = {
    "nv_inference_request_success": Role("counter", "requests"),
    "nv_inference_request_failure": Role("counter", "errors"),
    "nv_inference_count": Role("counter", "inferences"),
    "nv_inference_exec_count": Role("counter", "executions"),
    "nv_inference_request_duration_us": Role("sum", "e2e", _US),
    "nv_inference_queue_duration_us": Role("sum", "queue", _US),
    "nv_inference_compute_input_duration_us": Role("sum", "compute", _US),
    "nv_inference_compute_infer_duration_us": Role("sum", "compute", _US),
    "nv_inference_compute_output_duration_us": Role("sum", "compute", _US),
    # Decoupled (streaming) models: the first response's latency, a histogram in ms.
    **_histogram("nv_inference_first_response_histogram_ms", "ttft", 1e-3),
    # Summaries (``--metrics-config summary_latencies=true``): quantiles over Triton's own window.
    "nv_inference_request_summary_us": Role("quantile", "e2e", _US),
    "nv_inference_queue_summary_us": Role("quantile", "queue", _US),
    "nv_inference_first_response_summary_ms": Role("quantile", "ttft", 1e-3),
}
KNOWN = {**VLLM, **TRITON}


@dataclass(frozen=True)
class ServingNames:
    """Where a series' host, model and variant are read (settings ``PROMETHEUS_SERVING_*``).

    ``hosts``: labels tried in order (``instance`` gives its host part: ``10.0.0.7:8000`` ->
    ``10.0.0.7``); ``variant``: the label naming the variant; ``default_variant``: the variant of a
    series without it whose model's name states no precision; ``deployment``: the workload labels
    kept on the interval (``InferenceMetric.labels``, what canary checks select by)."""

    hosts: tuple[str, ...] = ("Hostname", "node", "instance")
    variant: str = "variant"
    default_variant: str = "bf16"
    deployment: tuple[str, ...] = ("track", "deployment", "version")
    precisions: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


def _read(labels: Mapping[str, str], name: str) -> str:
    return labels.get(f"exported_{name}") or labels.get(name) or ""


def instance_host(instance: str) -> str:
    """The host part of an ``instance`` label: ``node:8000`` -> ``node``, ``[::1]:80`` -> ``::1``."""
    if instance.startswith("["):
        return instance[1 : instance.find("]")] if "]" in instance else instance
    if instance.count(":") == 1:
        return instance.rsplit(":", 1)[0]
    return instance


def variant_of(model: str, labels: Mapping[str, str], names: ServingNames) -> str:
    """The variant label's value; else the precision the model's name states (``...-FP8`` -> fp8);
    else ``names.default_variant``."""
    given = _read(labels, names.variant)
    if given:
        return given
    tokens = model.lower().replace("/", "-").replace("_", "-").replace(".", "-").split("-")
    return next((token for token in tokens if token in names.precisions), names.default_variant)


# The inference API's limits on an interval's labels (``api.schemas.IntervalIn.labels``).
MAX_LABELS = 16
MAX_LABEL_CHARS = 63
# Labels Triton sets itself: ``version`` is the model's version there (its versions add up), not
# the deployment's.
_TRITON_OWN = frozenset({"model", "version"})


def deployment_labels(labels: Mapping[str, str], names: ServingNames, engine: str) -> dict[str, str]:
    """The allow-listed deployment labels a series carries ({} for none), each read as its
    ``exported_`` form first, as the host and the variant are. Raises ``WriteRejected`` for a value
    longer than the inference API takes (63 characters) or holding a control character."""
    out: dict[str, str] = {}
    for name in names.deployment[:MAX_LABELS]:
        if engine == "triton" and name in _TRITON_OWN:
            continue
        value = _read(labels, name)
        if not value:
            continue
        if len(name) > MAX_LABEL_CHARS or len(value) > MAX_LABEL_CHARS or not value.isprintable():
            raise WriteRejected(
                f"series {labels_text(labels)}: its deployment label {name!r} is longer than "
                f"{MAX_LABEL_CHARS} characters or holds a control character"
            )
        out[name] = value
    return out


def labels_common(first: Mapping[str, str] | None, second: Mapping[str, str]) -> dict[str, str]:
    """The pairs both hold (``first`` None: ``second`` whole): an interval's labels are those
    every series summed into it agrees on."""
    if first is None:
        return dict(second)
    return {name: value for name, value in first.items() if second.get(name) == value}


@dataclass(frozen=True)
class Target:
    """A part's identity: (host, engine, model, variant)."""

    host: str
    engine: str
    model: str
    variant: str


@dataclass
class ServingSeries:
    key: str  # the series' identity: metric and sorted labels, hashed
    labels: Mapping[str, str]
    role: Role
    target: Target
    group: str  # a histogram's identity (its labels but ``le``), else the key
    bound: float  # a bucket's upper bound in seconds, a summary's quantile
    errors: bool  # a vLLM request counter of an aborted request
    samples: list[tuple[int, float]]
    deployment: dict[str, str] = field(default_factory=dict)  # ``deployment_labels``


def series_key(labels: Mapping[str, str]) -> str:
    text = "\x00".join(f"{name}\x01{value}" for name, value in sorted(labels.items()))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _number(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


# Two samples of a series further apart than this (the inference API's longest interval, a day)
# give no interval: the later one is a new baseline.
MAX_INTERVAL_MS = 86_400_000
# A sample stamped further ahead than this is refused (the telemetry path's limit): its state
# would hide every later sample of the series.
MAX_FUTURE_MS = 5 * 60 * 1000


def serving_extract(
    series_list: Iterable[Series], *, names: ServingNames, now_ms: int, refused: Counter[str] | None = None
) -> list[ServingSeries]:
    """The request's vLLM and Triton series with samples (see the module's docstring). A series
    whose host label holds a control or format character is left out, its samples counted in
    ``refused`` (by ``refused_key``)."""
    out: list[ServingSeries] = []
    for series in series_list:
        role = KNOWN.get(series.name)
        if role is None or not series.samples:
            continue
        labels = series.labels
        engine, model_label = (
            ("vllm", "model_name") if series.name.startswith("vllm:") else ("triton", "model")
        )
        model = _read(labels, model_label)
        if not model:
            raise WriteRejected(f"series {labels_text(labels)} has no {model_label!r} label (the model)")
        host = label = ""
        for label in names.hosts:
            host = _read(labels, label)
            if host:
                host = instance_host(host) if label == "instance" else host
                break
        if not host:
            raise WriteRejected(
                f"series {labels_text(labels)} names no host: none of the labels {', '.join(names.hosts)}"
            )
        if hostname_problem(host) is not None:
            if refused is not None:
                refused[refused_key(series.name, label)] += len(series.samples)
            continue
        variant = variant_of(model, labels, names)
        if len(model) > 120 or len(variant) > 120 or len(host) > 255:
            raise WriteRejected(f"series {labels_text(labels)}: model, variant or host name too long")
        for stamp, value in series.samples:
            if not math.isfinite(value):
                raise WriteRejected(
                    f"series {labels_text(labels)} has the value {value} at {stamp} ms "
                    "(only Prometheus's stale marker may be NaN)",
                    code="not_finite",
                )
            if stamp > now_ms + MAX_FUTURE_MS:
                raise WriteRejected(
                    f"series {labels_text(labels)} has a sample at {stamp} ms, more than 5 minutes "
                    "in the future (check the clock of Prometheus's host)"
                )
        bound = 0.0
        group = key = series_key(labels)
        try:
            if role.kind == "bucket":
                bound = _number(labels.get("le", "+Inf")) * role.scale
                group = series_key({k: v for k, v in labels.items() if k not in ("le", "__name__")})
            elif role.kind == "quantile":
                bound = float(labels.get("quantile", "nan"))
        except ValueError:
            raise WriteRejected(f"series {labels_text(labels)}: its le or quantile is not a number") from None
        out.append(
            ServingSeries(
                key=key,
                labels=labels,
                role=role,
                target=Target(host, engine, model, variant),
                group=f"{series.name.rsplit('_', 1)[0]}:{group}",
                bound=bound,
                errors=engine == "vllm" and labels.get("finished_reason", "") in VLLM_ERROR_REASONS,
                samples=sorted(series.samples),
                deployment=deployment_labels(labels, names, engine),
            )
        )
    return out


@dataclass(frozen=True)
class Delta:
    series: ServingSeries
    start_ms: int
    end_ms: int
    delta: float
    value: float
    reset: bool


def series_deltas(
    extracted: list[ServingSeries], state: dict[str, tuple[int, float]]
) -> tuple[list[Delta], dict[str, tuple[int, float]]]:
    """Each series' deltas since ``state`` ({key: (ms, value)}, its last sample stored) and the
    state after them (only the series that moved). Summaries' quantiles are gauges: their
    "delta" is the value."""
    deltas: list[Delta] = []
    updated: dict[str, tuple[int, float]] = {}
    # Prometheus sends each sample as a time series of its own: a request holding several scrapes
    # holds a series several times, whose samples are read in time order together.
    merged: dict[str, tuple[ServingSeries, list[tuple[int, float]]]] = {}
    for series in extracted:
        merged.setdefault(series.key, (series, []))[1].extend(series.samples)
    for series, samples in merged.values():
        last = state.get(series.key)
        for stamp, value in sorted(samples):
            if last is not None and stamp <= last[0]:
                continue  # older than what is stored, or the same sample sent again
            if last is not None and stamp - last[0] <= MAX_INTERVAL_MS:
                reset = value < last[1] and series.role.kind != "quantile"
                delta = value if reset or series.role.kind == "quantile" else value - last[1]
                deltas.append(Delta(series, last[0], stamp, delta, value, reset))
            last = (stamp, value)
        if last is not None and last != state.get(series.key):
            updated[series.key] = last
    # A histogram with one bucket reset was reset as a whole (its other buckets' new values are
    # their counts since the restart, whatever the previous ones were).
    reset_groups = {(d.series.group, d.end_ms) for d in deltas if d.reset and d.series.role.kind == "bucket"}
    if reset_groups:
        deltas = [
            Delta(d.series, d.start_ms, d.end_ms, d.value, d.value, True)
            if (d.series.group, d.end_ms) in reset_groups
            else d
            for d in deltas
        ]
    return deltas, updated


@dataclass
class Part:
    """What a request adds to one interval: counter deltas, bucket deltas by signal and bound (in
    seconds), latency sums in seconds and their counts, summary quantiles (the newest)."""

    interval_s: int
    counters: dict[str, float] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    sums: dict[str, list[float]] = field(default_factory=dict)
    quantiles: dict[str, dict[float, float]] = field(default_factory=dict)
    series: dict[str, str] = field(default_factory=dict)  # one series' labels text, to name it
    labels: dict[str, str] | None = None  # the deployment labels its series agree on


PartKey = tuple[Target, int]  # (target, interval start in ms)


def _add(values: dict[str, float], key: str, amount: float) -> None:
    values[key] = values.get(key, 0.0) + amount


def parts_build(deltas: list[Delta]) -> dict[PartKey, Part]:
    parts: dict[PartKey, Part] = {}
    for d in deltas:
        series, role = d.series, d.series.role
        part = parts.get((series.target, d.start_ms))
        if part is None:
            seconds = max(1, round((d.end_ms - d.start_ms) / 1000))
            part = parts[(series.target, d.start_ms)] = Part(interval_s=seconds)
        part.series.setdefault("", labels_text(series.labels))
        part.labels = labels_common(part.labels, series.deployment)
        if role.kind == "counter":
            _add(part.counters, role.target, d.delta)
            if series.errors:
                _add(part.counters, "errors", d.delta)
            if series.target.engine == "triton" and role.target == "errors":
                _add(part.counters, "requests", d.delta)  # Triton's requests: successful and failed
        elif role.kind == "bucket":
            buckets = part.buckets.setdefault(role.target, {})
            buckets[d.series.bound] = buckets.get(d.series.bound, 0.0) + d.delta
        elif role.kind == "sum":
            part.sums.setdefault(role.target, [0.0, 0.0])[0] += d.delta * role.scale
        elif role.kind == "count":
            part.sums.setdefault(role.target, [0.0, 0.0])[1] += d.delta
        elif role.kind == "quantile":
            part.quantiles.setdefault(role.target, {})[d.series.bound] = d.value * role.scale
    return parts


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile (0..1) from cumulative buckets {upper bound: count}; None without
    observations or without the ``+Inf`` bucket. Counts that go down towards higher bounds
    (parts of a histogram not yet all arrived) are raised to the previous one, as Prometheus
    does."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][0] != math.inf:
        return None
    monotonic: list[tuple[float, float]] = []
    for bound, count in ordered:
        monotonic.append((bound, max(count, monotonic[-1][1]) if monotonic else count))
    total = monotonic[-1][1]
    if total <= 0:
        return None
    rank = q * total
    previous_bound = previous_count = 0.0
    for index, (bound, count) in enumerate(monotonic):
        if count >= rank:
            if bound == math.inf:
                return monotonic[index - 1][0] if index > 0 else None
            in_bucket = count - previous_count
            if in_bucket <= 0 or (index == 0 and bound <= 0):
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / in_bucket
        previous_bound, previous_count = bound, count
    return None  # pragma: no cover - the +Inf bucket holds every rank


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def buckets_json(buckets: dict[float, float]) -> list[list[Any]]:
    return [
        ["+Inf" if bound == math.inf else bound, round(count)] for bound, count in sorted(buckets.items())
    ]


def buckets_read(stored: list[list[Any]]) -> dict[float, float]:
    return {(math.inf if bound == "+Inf" else float(bound)): float(count) for bound, count in stored}


@dataclass
class Accumulated:
    """An interval row's additive content (what ``Part``s add to)."""

    interval_s: int
    engine: str = "vllm"
    counters: dict[str, float] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    sums: dict[str, list[float]] = field(default_factory=dict)
    quantiles: dict[str, dict[float, float]] = field(default_factory=dict)

    def add(self, part: Part) -> None:
        for name, value in part.counters.items():
            _add(self.counters, name, value)
        for signal, buckets in part.buckets.items():
            mine = self.buckets.setdefault(signal, {})
            for bound, count in buckets.items():
                mine[bound] = mine.get(bound, 0.0) + count
        for signal, (total, count) in part.sums.items():
            mine_sum = self.sums.setdefault(signal, [0.0, 0.0])
            mine_sum[0] += total
            mine_sum[1] += count
        for signal, quantiles in part.quantiles.items():
            self.quantiles.setdefault(signal, {}).update(quantiles)


def interval_fields(row: Accumulated) -> dict[str, Any]:
    """The inference ingest's interval fields (``serving.services.IntervalInput``) of ``row``."""
    counters = row.counters
    sums = {signal: list(values) for signal, values in row.sums.items()}
    if row.engine == "triton":  # Triton's durations are over its successful requests
        for values in sums.values():
            values[1] = counters.get("requests", 0.0) - counters.get("errors", 0.0)
    out: dict[str, Any] = {
        "interval_s": row.interval_s,
        "requests": round(counters.get("requests", 0.0)),
        "errors": round(counters.get("errors", 0.0)),
        "prompt_tokens": round(counters.get("prompt_tokens", 0.0)),
        "generated_tokens": round(counters.get("generated_tokens", 0.0)),
        "histograms": {f"{signal}_seconds": buckets_json(b) for signal, b in sorted(row.buckets.items())},
        "latency_sums": {
            f"{signal}_seconds": [round(total, 9), round(count)]
            for signal, (total, count) in sorted(sums.items())
        },
    }
    for name in ("inferences", "executions"):
        if name in counters:
            out["latency_sums"][name] = round(counters[name])
    for signal in PERCENTILE_SIGNALS:
        buckets = row.buckets.get(signal)
        if buckets is None and signal == "itl":
            buckets = row.buckets.get("tpot")
        if buckets is not None:
            out[f"{signal}_ms"] = {
                "p50": _ms(histogram_quantile(0.5, buckets)),
                "p99": _ms(histogram_quantile(0.99, buckets)),
            }
        elif signal in row.quantiles:
            quantiles = row.quantiles[signal]
            out[f"{signal}_ms"] = {"p50": _ms(quantiles.get(0.5)), "p99": _ms(quantiles.get(0.99))}
    return out


def accumulated_read(row: dict[str, Any]) -> Accumulated:
    """An interval row stored before (its ``interval_s``, counters, ``histograms`` and
    ``latency_sums``) as the sum to add a part to."""
    sums = dict(row.get("latency_sums") or {})
    counters = {
        name: float(row[name]) for name in ("requests", "errors", "prompt_tokens", "generated_tokens")
    }
    for name in ("inferences", "executions"):
        if name in sums:
            counters[name] = float(sums.pop(name))
    # A percentile stored without buckets came from a summary: kept until a newer one comes.
    quantiles: dict[str, dict[float, float]] = {}
    for signal in PERCENTILE_SIGNALS:
        if f"{signal}_seconds" in (row.get("histograms") or {}):
            continue
        found = {q: row.get(f"{signal}_{name}_ms") for q, name in ((0.5, "p50"), (0.99, "p99"))}
        if any(value is not None for value in found.values()):
            quantiles[signal] = {q: value / 1000 for q, value in found.items() if value is not None}
    return Accumulated(
        interval_s=row["interval_s"],
        engine=row["engine"],
        counters=counters,
        buckets={
            key.removesuffix("_seconds"): buckets_read(value)
            for key, value in (row.get("histograms") or {}).items()
        },
        sums={key.removesuffix("_seconds"): [float(v[0]), float(v[1])] for key, v in sums.items()},
        quantiles=quantiles,
    )


def interval_start(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
