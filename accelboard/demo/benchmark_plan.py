"""What the demo fleet benchmarks: models and variants, the nightly configurations, the noise,
the injected regressions, the slow quantization drift, and the capacity plan's Llama-2-70B sweeps.

Pure data, like ``accelboard.demo.plan``; ``accelboard.demo.history_generator`` turns it into runs.
"""

from __future__ import annotations

from typing import Any

# Models and variants. The first high-precision, unquantized variant becomes the reference.
MODELS: list[dict[str, Any]] = [
    {
        "name": "Llama-3.1-8B",
        "family": "Llama",
        "task": "llm",
        "parameters_b": 8.0,
        "variants": [("bf16", "bf16", ""), ("fp8", "fp8", "FP8-dynamic"), ("int4-awq", "int4", "AWQ")],
    },
    {
        "name": "Llama-2-70B",
        "family": "Llama",
        "task": "llm",
        "parameters_b": 70.0,
        "variants": [("fp16", "fp16", ""), ("fp8", "fp8", "FP8-static"), ("int4-gptq", "int4", "GPTQ")],
    },
    {
        "name": "Mixtral-8x7B",
        "family": "Mixtral",
        "task": "llm",
        "parameters_b": 46.7,
        "variants": [("bf16", "bf16", ""), ("fp8", "fp8", "FP8-dynamic")],
    },
    {
        "name": "BERT-large",
        "family": "BERT",
        "task": "embedding",
        "parameters_b": 0.34,
        "variants": [("fp16", "fp16", ""), ("int8", "int8", "SmoothQuant")],
    },
    {
        "name": "ResNet-50",
        "family": "ResNet",
        "task": "vision",
        "parameters_b": 0.026,
        "variants": [("fp16", "fp16", ""), ("int8", "int8", "TensorRT PTQ")],
    },
    {
        "name": "SDXL",
        "family": "Stable Diffusion",
        "task": "diffusion",
        "parameters_b": 3.5,
        "variants": [("fp16", "fp16", ""), ("fp8", "fp8", "TensorRT FP8")],
    },
    {
        "name": "Whisper-large",
        "family": "Whisper",
        "task": "speech",
        "parameters_b": 1.55,
        "variants": [("fp16", "fp16", ""), ("int8", "int8", "CTranslate2 int8")],
    },
]

_LLM = {"scenario": "offline", "batch_size": 64, "input_length": 1024, "output_length": 256}

# Nightly benchmark configurations. ``base``: throughput per second, p50 latency ms, power W (whole
# configuration), peak memory GiB per GPU, accuracy (score). Energy per inference follows from
# power / throughput. ``key`` names the configuration in the manifest.
BENCHMARKS: list[dict[str, Any]] = [
    {
        "key": "llama8b-bf16-h100",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "bf16",
        "gpu": "h100-sxm-80gb",
        "count": 1,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (4700.0, 2900.0, 560.0, 71.0, 0.683),
    },
    {
        "key": "llama8b-fp8-h100",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "fp8",
        "gpu": "h100-sxm-80gb",
        "count": 1,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (7100.0, 2100.0, 600.0, 70.0, 0.679),
    },
    {
        "key": "llama8b-int4-h100",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "int4-awq",
        "gpu": "h100-sxm-80gb",
        "count": 1,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (6200.0, 2400.0, 480.0, 68.0, 0.671),
    },
    {
        "key": "llama8b-fp8-l40s",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "fp8",
        "gpu": "l40s",
        "count": 1,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (2100.0, 7600.0, 330.0, 41.0, 0.679),
    },
    {
        "key": "llama8b-bf16-mi300x",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "bf16",
        "gpu": "mi300x",
        "count": 1,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3+rocm"},
        "base": (5200.0, 2700.0, 650.0, 172.0, 0.683),
    },
    {
        "key": "llama70b-fp8-h200x8",
        "team": "llm-serving",
        "model": "Llama-2-70B",
        "variant": "fp8",
        "gpu": "h200-sxm-141gb",
        "count": 8,
        "workload": {**_LLM, "framework": "TensorRT-LLM", "framework_version": "0.13.0"},
        "base": (30000.0, 8200.0, 5100.0, 128.0, 0.704),
    },
    {
        "key": "llama70b-fp16-h100x8",
        "team": "llm-serving",
        "model": "Llama-2-70B",
        "variant": "fp16",
        "gpu": "h100-sxm-80gb",
        "count": 8,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (16000.0, 12500.0, 5200.0, 76.0, 0.709),
    },
    {
        "key": "mixtral-fp8-h100x8",
        "team": "llm-serving",
        "model": "Mixtral-8x7B",
        "variant": "fp8",
        "gpu": "h100-sxm-80gb",
        "count": 8,
        "workload": {**_LLM, "framework": "TensorRT-LLM", "framework_version": "0.13.0"},
        "base": (48000.0, 5200.0, 5000.0, 62.0, 0.702),
    },
    {
        "key": "llama70b-fp16-mi300x8",
        "team": "research-platform",
        "model": "Llama-2-70B",
        "variant": "fp16",
        "gpu": "mi300x",
        "count": 8,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3+rocm"},
        "base": (22000.0, 9400.0, 5600.0, 160.0, 0.709),
    },
    {
        "key": "mixtral-bf16-mi300x8",
        "team": "research-platform",
        "model": "Mixtral-8x7B",
        "variant": "bf16",
        "gpu": "mi300x",
        "count": 8,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3+rocm"},
        "base": (38000.0, 6100.0, 5400.0, 150.0, 0.706),
    },
    {
        "key": "llama70b-int4-h100x2",
        "team": "research-platform",
        "model": "Llama-2-70B",
        "variant": "int4-gptq",
        "gpu": "h100-sxm-80gb",
        "count": 2,
        "workload": {**_LLM, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (3500.0, 15800.0, 1150.0, 38.0, 0.696),
    },
    {
        "key": "bert-fp16-a100",
        "team": "research-platform",
        "model": "BERT-large",
        "variant": "fp16",
        "gpu": "a100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 256,
            "input_length": 384,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (2600.0, 95.0, 390.0, 9.5, 0.9087),
    },
    {
        "key": "bert-int8-a100",
        "team": "research-platform",
        "model": "BERT-large",
        "variant": "int8",
        "gpu": "a100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 256,
            "input_length": 384,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (3700.0, 68.0, 395.0, 6.2, 0.9051),
    },
    {
        "key": "bert-int8-l4",
        "team": "research-platform",
        "model": "BERT-large",
        "variant": "int8",
        "gpu": "l4",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 64,
            "input_length": 384,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (1000.0, 62.0, 71.0, 3.1, 0.9051),
    },
    {
        "key": "resnet-fp16-a100",
        "team": "vision",
        "model": "ResNet-50",
        "variant": "fp16",
        "gpu": "a100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 256,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (20000.0, 12.5, 380.0, 5.8, 0.7646),
    },
    {
        "key": "resnet-int8-a100",
        "team": "vision",
        "model": "ResNet-50",
        "variant": "int8",
        "gpu": "a100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 256,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (36000.0, 7.1, 390.0, 3.9, 0.7621),
    },
    {
        "key": "resnet-int8-l4",
        "team": "vision",
        "model": "ResNet-50",
        "variant": "int8",
        "gpu": "l4",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 128,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (12500.0, 10.2, 71.0, 2.4, 0.7621),
    },
    {
        "key": "sdxl-fp16-l40s",
        "team": "vision",
        "model": "SDXL",
        "variant": "fp16",
        "gpu": "l40s",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 8,
            "framework": "Diffusers",
            "framework_version": "0.30.3",
        },
        "base": (0.55, 1820.0, 340.0, 18.5, 31.68),
    },
    {
        "key": "sdxl-fp8-h100",
        "team": "vision",
        "model": "SDXL",
        "variant": "fp8",
        "gpu": "h100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 8,
            "framework": "TensorRT",
            "framework_version": "10.4",
        },
        "base": (1.95, 510.0, 640.0, 21.0, 31.59),
    },
    {
        "key": "whisper-fp16-l40s",
        "team": "speech-audio",
        "model": "Whisper-large",
        "variant": "fp16",
        "gpu": "l40s",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 16,
            "framework": "PyTorch",
            "framework_version": "2.4.1",
        },
        "base": (12.0, 1300.0, 300.0, 11.0, 0.968),
    },
    {
        "key": "whisper-int8-l4",
        "team": "speech-audio",
        "model": "Whisper-large",
        "variant": "int8",
        "gpu": "l4",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 8,
            "framework": "CTranslate2",
            "framework_version": "4.4.0",
        },
        "base": (5.0, 1650.0, 70.0, 6.0, 0.962),
    },
    {
        "key": "whisper-fp16-a100",
        "team": "speech-audio",
        "model": "Whisper-large",
        "variant": "fp16",
        "gpu": "a100-sxm-80gb",
        "count": 1,
        "workload": {
            "scenario": "offline",
            "batch_size": 32,
            "framework": "PyTorch",
            "framework_version": "2.4.1",
        },
        "base": (16.0, 1900.0, 350.0, 14.0, 0.968),
    },
]

# Batch-size sweeps of Llama-3.1-8B fp8 (demo assumption) around the nightly batch-64 runs above, so
# that the hardware page has a sweep per accelerator with a knee: on the H100 p99 outgrows
# throughput from batch 64 to 128 (knee at 64), on the L40S from 32 to 64 (knee at 32). Appended
# after the other configurations so that their start times do not move.
# (gpu, batch size) -> (throughput tokens/s, p50 ms, power W, peak memory GiB)
_LLAMA8B_FP8_SWEEPS: dict[tuple[str, int], tuple[float, float, float, float]] = {
    ("h100-sxm-80gb", 8): (1500.0, 1400.0, 380.0, 70.0),
    ("h100-sxm-80gb", 16): (2800.0, 1500.0, 450.0, 70.0),
    ("h100-sxm-80gb", 32): (4800.0, 1700.0, 530.0, 70.0),
    ("h100-sxm-80gb", 128): (8300.0, 3300.0, 650.0, 71.0),
    ("l40s", 8): (700.0, 3000.0, 220.0, 41.0),
    ("l40s", 16): (1200.0, 3400.0, 260.0, 41.0),
    ("l40s", 32): (1800.0, 4600.0, 300.0, 41.0),
}
BENCHMARKS += [
    {
        "key": f"llama8b-fp8-{'h100' if gpu.startswith('h100') else gpu}-bs{batch}",
        "team": "llm-serving",
        "model": "Llama-3.1-8B",
        "variant": "fp8",
        "gpu": gpu,
        "count": 1,
        "workload": {**_LLM, "batch_size": batch, "framework": "vLLM", "framework_version": "0.6.3"},
        "base": (throughput, p50, power, memory_gib, 0.679),
    }
    for (gpu, batch), (throughput, p50, power, memory_gib) in _LLAMA8B_FP8_SWEEPS.items()
]

# Relative run-to-run noise (standard deviation) per metric, from what repeated runs show.
NOISE = {
    "throughput": 0.015,
    "latency_p50_ms": 0.02,
    "latency_p99_ms": 0.03,
    "power_avg_w": 0.01,
    "energy": 0.015,
    "memory_peak_bytes": 0.002,
    "accuracy": 0.001,
}
SAMPLES_PER_METRIC = 5

# Injected benchmark events. ``at`` is the fraction of the run window where the event starts;
# ``days`` how long it lasts before recovery (None: it persists). Each names every series it moves,
# with the relative change: a throughput drop at unchanged power also costs energy per inference.
BENCH_EVENTS: list[dict[str, Any]] = [
    {
        "id": "llama8b-fp8-throughput-drop",
        "kind": "regression",
        "config": "llama8b-fp8-h100",
        "at": 0.45,
        "days": 10,
        "description": "vLLM scheduler change: 12% fewer tokens/s for 10 nights, then reverted",
        "changes": {
            "throughput_tokens_per_s": -0.12,
            "energy_per_token_j": 1 / 0.88 - 1,
            "energy_per_inference_j": 1 / 0.88 - 1,
        },
    },
    {
        "id": "llama70b-p99-step",
        "kind": "regression",
        "config": "llama70b-fp8-h200x8",
        "at": 0.7,
        "days": None,
        "description": "TensorRT-LLM upgrade: p99 latency 20% higher from then on",
        "changes": {"latency_p99_ms": 0.20},
    },
    {
        "id": "resnet-l4-energy-step",
        "kind": "regression",
        "config": "resnet-int8-l4",
        "at": 0.8,
        "days": None,
        "description": "Driver update raised L4 power at the same throughput: energy per inference +15%",
        "changes": {"power_avg_w": 0.15, "energy_per_inference_j": 0.15},
    },
    {
        "id": "whisper-memory-bump",
        "kind": "regression",
        "config": "whisper-fp16-l40s",
        "at": 0.25,
        "days": 6,
        "description": "A larger decoding cache: peak memory +25% for 6 nights, then fixed",
        "changes": {"memory_peak_bytes": 0.25},
    },
    {
        "id": "llama70b-mi300x-throughput-drop",
        "kind": "regression",
        "config": "llama70b-fp16-mi300x8",
        "at": 0.6,
        "days": None,
        "description": "ROCm upgrade: 18% fewer tokens/s from then on",
        "changes": {
            "throughput_tokens_per_s": -0.18,
            "energy_per_token_j": 1 / 0.82 - 1,
            "energy_per_inference_j": 1 / 0.82 - 1,
        },
    },
    {
        "id": "mixtral-outlier",
        "kind": "outlier",
        "config": "mixtral-fp8-h100x8",
        "at": 0.5,
        "days": 1,
        "description": "One noisy night (a neighbour on the node): throughput -25% once, next night normal",
        "changes": {"throughput_tokens_per_s": -0.25},
    },
]

# The slow quantization drift: relative accuracy change per day, from ``at`` to the end.
DRIFT_EVENT: dict[str, Any] = {
    "id": "llama8b-int4-accuracy-drift",
    "kind": "drift",
    "config": "llama8b-int4-h100",
    "at": 0.2,
    "metric": "accuracy",
    "per_day": -0.0005,
    "description": "int4-awq accuracy slides 0.05%/day (calibration set no longer matches traffic)",
}

# Drift budgets (relative accuracy loss) other than the 1% default. The Llama-3.1-8B team serves
# int4-awq for cost and accepts up to 3%: it starts ~1.8% below bf16, so the slow drift above
# crosses 3% about 25 days after it starts, and the daily drift check warns of the trend first.
DRIFT_BUDGETS: dict[str, float] = {"Llama-3.1-8B": 0.03}


# --- Capacity plan (demo assumption) -----------------------------------------------------------
# Llama-2-70B is shaped so that the plan's answer is not the benchmark's. Batch-size sweeps around
# the nightly batch-64 runs: fp16 on 8× H100 at batch 128 is the cheapest configuration per token
# on its benchmark (27 000 tokens/s on on-prem H100s), but its p99 (1.6 × p50 = 30.4 s) fails the
# team's 18 s SLO at that load; at the SLO an H100 replica only sustains batch 32 (10 000 tokens/s,
# p99 14.4 s). fp8 on 8× H200 sustains batch 64 (30 000 tokens/s, p99 15.7 s after the TensorRT-LLM
# step) and so serves the production peak (55 req/s × 280 output tokens, growing 4 %/month) with
# a third fewer GPUs and a lower monthly cost. Appended so that earlier configurations keep their
# start times. (variant, gpu, framework, batch) -> (throughput tokens/s, p50 ms, power W, GiB, accuracy)
_LLAMA70B_PLAN: dict[tuple[str, str, str, int], tuple[float, float, float, float, float]] = {
    ("fp8", "h200-sxm-141gb", "TensorRT-LLM", 16): (12000.0, 3300.0, 3600.0, 128.0, 0.704),
    ("fp8", "h200-sxm-141gb", "TensorRT-LLM", 32): (20000.0, 6400.0, 4300.0, 128.0, 0.704),
    ("fp16", "h100-sxm-80gb", "vLLM", 32): (10000.0, 9000.0, 4400.0, 76.0, 0.709),
    ("fp16", "h100-sxm-80gb", "vLLM", 128): (27000.0, 19000.0, 5400.0, 78.0, 0.709),
}
_FRAMEWORK_VERSIONS = {"TensorRT-LLM": "0.13.0", "vLLM": "0.6.3"}
BENCHMARKS += [
    {
        "key": f"llama70b-{variant}-{gpu.split('-')[0]}x8-bs{batch}",
        "team": "llm-serving",
        "model": "Llama-2-70B",
        "variant": variant,
        "gpu": gpu,
        "count": 8,
        "workload": {
            **_LLM,
            "batch_size": batch,
            "framework": framework,
            "framework_version": _FRAMEWORK_VERSIONS[framework],
        },
        "base": values,
    }
    for (variant, gpu, framework, batch), values in _LLAMA70B_PLAN.items()
]
