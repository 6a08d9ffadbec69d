"""Prometheus text exposition parsing and vLLM serving metrics as per-interval deltas.

1. ``parse_exposition`` reads the text format (``# HELP``/``# TYPE`` lines, ``name{labels} value
   [timestamp]``, escaped label values, ``+Inf``/``NaN``); a malformed line raises ``ValueError``
   naming its line number.
2. ``vllm_snapshot`` groups the vLLM series by model (``model_name`` label): counters summed over
   their other labels, histograms as cumulative bucket counts. Names change between vLLM
   versions, so each signal has a list of names, newest first (``VLLM_NAMES``).
3. ``snapshot_delta`` subtracts two snapshots. A counter or bucket that went down means the
   server restarted: the new value is the delta (as Prometheus' ``increase`` does).
4. ``histogram_quantile`` interpolates linearly inside the bucket holding the rank, as
   Prometheus' ``histogram_quantile`` does; a rank in the ``+Inf`` bucket returns the highest
   finite bound (the true value is only known to be above it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


@dataclass(frozen=True)
class PromSample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str, default: str = "") -> str:
        for name, value in self.labels:
            if name == key:
                return value
        return default


def _unescape(value: str) -> str:
    return value.replace("\\\\", "\x00").replace('\\"', '"').replace("\\n", "\n").replace("\x00", "\\")


def _number(text: str) -> float:
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)  # "NaN" parses as nan


def parse_exposition(text: str) -> list[PromSample]:
    samples = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise ValueError(f"line {number}: not a Prometheus sample: {line[:120]!r}")
        name, label_text, value_text = match.group(1), match.group(2), match.group(3)
        labels: list[tuple[str, str]] = []
        if label_text:
            body = label_text[1:-1]
            position = 0
            while position < len(body):
                label = _LABEL.match(body, position)
                if not label:
                    raise ValueError(f"line {number}: bad label set: {label_text[:120]!r}")
                labels.append((label.group(1), _unescape(label.group(2))))
                position = label.end()
        try:
            value = _number(value_text)
        except ValueError:
            raise ValueError(f"line {number}: bad value {value_text!r}") from None
        samples.append(PromSample(name, tuple(labels), value))
    return samples


# Newest name first; the first one present in a scrape is used for the whole scrape.
VLLM_NAMES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generated_tokens": ("vllm:generation_tokens_total",),
    "requests": ("vllm:request_success_total",),
}
HISTOGRAMS = ("ttft", "itl", "e2e")
COUNTERS = ("prompt_tokens", "generated_tokens", "requests", "errors")
# vLLM counts aborted requests among "finished" ones; they are the errors of an interval.
ERROR_REASONS = {"abort"}


@dataclass
class Snapshot:
    """One scrape of one model: counter totals and cumulative histogram buckets."""

    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, dict[float, float]] = field(default_factory=dict)


def vllm_snapshot(samples: Sequence[PromSample], *, model: str = "") -> dict[str, Snapshot]:
    """vLLM series by model name (``model`` overrides the ``model_name`` label)."""
    present = {sample.name for sample in samples}
    chosen: dict[str, str] = {}
    for key, names in VLLM_NAMES.items():
        for name in names:
            suffix = "_bucket" if key in HISTOGRAMS else ""
            if name + suffix in present:
                chosen[key] = name
                break
    snapshots: dict[str, Snapshot] = {}
    for sample in samples:
        model_name = model or sample.label("model_name") or "unknown"
        for key, name in chosen.items():
            if key in HISTOGRAMS and sample.name == name + "_bucket":
                le = _number(sample.label("le", "+Inf"))
                buckets = snapshots.setdefault(model_name, Snapshot()).histograms.setdefault(key, {})
                buckets[le] = buckets.get(le, 0.0) + sample.value
            elif key not in HISTOGRAMS and sample.name == name:
                counters = snapshots.setdefault(model_name, Snapshot()).counters
                counters[key] = counters.get(key, 0.0) + sample.value
                if key == "requests" and sample.label("finished_reason") in ERROR_REASONS:
                    counters["errors"] = counters.get("errors", 0.0) + sample.value
    return snapshots


def _increase(before: float | None, after: float) -> float:
    if before is None or after < before:
        return after
    return after - before


def snapshot_delta(before: Snapshot | None, after: Snapshot) -> Snapshot:
    delta = Snapshot()
    before = before or Snapshot()
    for key, value in after.counters.items():
        delta.counters[key] = _increase(before.counters.get(key), value)
    for key, buckets in after.histograms.items():
        previous = before.histograms.get(key, {})
        # One bucket going down means the whole histogram was reset.
        reset = any(buckets[le] < previous.get(le, 0.0) for le in buckets)
        delta.histograms[key] = {
            le: (count if reset else count - previous.get(le, 0.0)) for le, count in buckets.items()
        }
    return delta


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile (0..1) from cumulative buckets {upper bound: count}; None with no observations."""
    if not buckets:
        return None
    ordered = sorted(buckets.items())
    if ordered[-1][0] != math.inf:
        return None  # not a complete histogram
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for index, (bound, count) in enumerate(ordered):
        if count >= rank:
            if bound == math.inf:
                return ordered[index - 1][0] if index > 0 else None
            in_bucket = count - previous_count
            if in_bucket <= 0:
                return bound
            if index == 0 and bound <= 0:
                return bound
            lower = previous_bound
            return lower + (bound - lower) * (rank - previous_count) / in_bucket
        previous_bound, previous_count = bound, count
    return ordered[-2][0] if len(ordered) > 1 else None


def _ms(value: float | None) -> float | None:
    return round(value * 1000.0, 3) if value is not None else None


def interval_build(
    *,
    model: str,
    variant: str,
    delta: Snapshot,
    start: float,
    seconds: float,
    accelerator_uuids: Sequence[str],
    engine: str = "vllm",
    labels: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """One ``intervals[]`` item of POST /api/v1/inference-metrics; ``labels``: the deployment's
    (``scrape_labels``), what canary checks select by."""
    item: dict[str, object] = {
        "model": model,
        "variant": variant,
        "engine": engine,
        "accelerator_uuids": list(accelerator_uuids),
        "interval_start": datetime.fromtimestamp(start, tz=timezone.utc).isoformat().replace("+00:00", "Z"),
        # Whole seconds, at least 1 (the API's type); the start time carries the precision.
        "interval_s": max(1, int(round(seconds))),
        "requests": int(round(delta.counters.get("requests", 0.0))),
        "errors": int(round(delta.counters.get("errors", 0.0))),
        "prompt_tokens": int(round(delta.counters.get("prompt_tokens", 0.0))),
        "generated_tokens": int(round(delta.counters.get("generated_tokens", 0.0))),
    }
    histograms: dict[str, list[list[object]]] = {}
    for key in HISTOGRAMS:
        buckets = delta.histograms.get(key)
        if buckets is None:
            continue
        item[f"{key}_ms"] = {
            "p50": _ms(histogram_quantile(0.5, buckets)),
            "p99": _ms(histogram_quantile(0.99, buckets)),
        }
        histograms[f"{key}_seconds"] = [
            ["+Inf" if bound == math.inf else bound, int(round(count))]
            for bound, count in sorted(buckets.items())
        ]
    if histograms:
        item["histograms"] = histograms
    if labels:
        item["labels"] = dict(labels)
    return item
