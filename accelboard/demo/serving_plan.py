"""What the demo fleet serves: production agreement with the reference, the served LLMs and the
serving objectives the capacity plan sizes for.

Pure data, like ``accelboard.demo.plan``; ``accelboard.demo.history_generator`` turns it into metrics.
"""

from __future__ import annotations

from typing import Any

# Production agreement with the reference on sampled traffic (POST /api/v1/drift-metrics), per
# served quantized variant and day: (model, variant, task, agreement rate, KL divergence in nats,
# samples per day). The int4-awq rate slides with the drift (``benchmark_plan.DRIFT_EVENT``),
# AGREEMENT_SLIDE_PER_DAY a day.
AGREEMENT_TEAM = "llm-serving"
AGREEMENT_DAYS = 30
AGREEMENT_SLIDE_PER_DAY = 0.0008
PRODUCTION_AGREEMENT: list[tuple[str, str, str, float, float, int]] = [
    ("Llama-3.1-8B", "fp8", "chat", 0.985, 0.006, 5000),
    ("Llama-3.1-8B", "int4-awq", "chat", 0.962, 0.018, 8000),
    ("Llama-2-70B", "fp8", "chat", 0.982, 0.008, 2000),
    ("Mixtral-8x7B", "fp8", "chat", 0.979, 0.009, 3000),
]

# Served LLMs (InferenceMetric), on the named host's ``gpus`` (by index): the GPUs the model's pods
# hold (``plan.KUBERNETES_CLUSTER``, ``plan.TEAM_PODS``), so that its serving costs and its cost by
# model on the allocation page count the same GPUs. ``peak_rps`` at the top of the daily cycle.
SERVING: list[dict[str, Any]] = [
    {
        "host": "reno-h100-01",
        "model": "Llama-3.1-8B",
        "variant": "fp8",
        "engine": "vllm",
        # GPUs 4-7 run other teams' pods, a time-sliced GPU and MIG instances.
        "gpus": [0, 1, 2, 3],
        "peak_rps": 60.0,
        "prompt": 900,
        "output": 220,
        "ttft_ms": 85.0,
        "itl_ms": 11.0,
    },
    {
        "host": "reno-h200-01",
        "model": "Llama-2-70B",
        "variant": "fp8",
        "engine": "trtllm",
        "gpus": list(range(8)),
        # Shaped for the capacity plan (benchmark_plan._LLAMA70B_PLAN): busy enough that a replica at
        # the SLO matters, growing 4 % a month.
        "peak_rps": 55.0,
        "prompt": 1100,
        "output": 280,
        "ttft_ms": 240.0,
        "itl_ms": 8.0,
        "growth_per_month": 0.04,
    },
    {
        "host": "reno-h100-02",
        "model": "Mixtral-8x7B",
        "variant": "fp8",
        "engine": "vllm",
        "gpus": [0, 1, 2, 3],
        "peak_rps": 20.0,
        "prompt": 1100,
        "output": 260,
        "ttft_ms": 160.0,
        "itl_ms": 16.0,
    },
    {
        "host": "reno-h100-02",
        "model": "Llama-3.1-8B",
        "variant": "bf16",
        "engine": "vllm",
        "gpus": [4, 5, 6, 7],
        "peak_rps": 25.0,
        "prompt": 900,
        "output": 220,
        "ttft_ms": 95.0,
        "itl_ms": 13.0,
    },
    {
        "host": "aws-p5-01",
        "model": "Llama-3.1-8B",
        "variant": "int4-awq",
        "engine": "vllm",
        "gpus": list(range(8)),
        "peak_rps": 80.0,
        "prompt": 700,
        "output": 180,
        "ttft_ms": 70.0,
        "itl_ms": 10.0,
    },
]

# The canaries (``accelboard.demo.canary``): new builds of the stable deployment above (the first
# SERVING entry), each rolled out in place of one of its replicas for the window ``canary_window``
# (from the first midnight UTC in the telemetry's last CANARY_WINDOW_HOURS): its own GPU of that host (``gpu``, an
# index), held by its own pod (``pod``, a ``plan.POD_TEMPLATES`` key), with that replica's slice of
# the traffic; the stable deployment keeps its other GPUs and the rest of the traffic, so no GPU is
# named by two deployments at once. ``slower``: latency factor; ``per_gpu``: throughput per GPU
# against the stable build's.
CANARY_HOST = "reno-h100-01"
CANARY_MODEL = "Llama-3.1-8B"
CANARY_STABLE_VARIANT = "fp8"
CANARY_WINDOW_HOURS = 72
CANARIES: list[dict[str, Any]] = [
    {
        "name": "llama8b-fp8-v2",
        "variant": "fp8-v2",
        "labels": {"track": "canary"},
        "gpu": 3,
        "pod": "llama8b-fp8-v2",
        "slower": 1.3,
        "per_gpu": 1 / 1.3,
    },
    {
        "name": "llama8b-fp8-v3",
        "variant": "fp8-v3",
        "labels": {"track": "canary-v3"},
        "gpu": 2,
        "pod": "llama8b-fp8-v3",
        "slower": 1.0,
        "per_gpu": 1.0,
    },
]


def canary_window(telemetry_start: int, telemetry_end: int, serving_interval_s: int) -> tuple[int, int]:
    """[start, end) of the canaries' rollout, epoch seconds, to the end of the telemetry: from the
    first midnight UTC in its last CANARY_WINDOW_HOURS, so that no GPU changes deployment within
    a UTC day (the serving costs split a GPU named by two variants in one day by their tokens, the
    cost by workload by the time each held it); the whole telemetry when it is no longer than that,
    from its first serving interval (no earlier interval then names the canaries' GPUs)."""
    earliest = telemetry_end - CANARY_WINDOW_HOURS * 3600
    if earliest <= telemetry_start:
        return telemetry_start - telemetry_start % serving_interval_s, telemetry_end
    day = 86_400
    return earliest + (-earliest) % day, telemetry_end


# Serving objectives the LLM team set (alerts.ServingSlo, p99 end-to-end ms, every variant): the
# capacity plan sizes each model at its objective. Above the production e2e p99 at peak, so the
# production SLO rule stays quiet.
SERVING_SLOS: list[tuple[str, str, float]] = [
    ("llm-serving", "Llama-3.1-8B", 20000.0),
    ("llm-serving", "Llama-2-70B", 18000.0),
    ("llm-serving", "Mixtral-8x7B", 30000.0),
]
