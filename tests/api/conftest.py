"""API test helpers: tokens per team and kind, payload builders, and row counts for "nothing stored"."""

from __future__ import annotations

import gzip
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from django.db import connection
from django.test import Client

from accelboard.api.services import token_create
from accelboard.core.models import Team

GPU_A = "GPU-8f0c1a2b-0000-4000-8000-000000000001"
GPU_B = "GPU-8f0c1a2b-0000-4000-8000-000000000002"

# Every table an ingest request may write to; "nothing stored" means none of these moved.
COUNTED_TABLES = (
    "fleet_telemetrysample",
    "fleet_telemetrypartial",
    "fleet_host",
    "fleet_accelerator",
    "fleet_workload",
    "fleet_gpuattribution",
    "benchmarks_model",
    "benchmarks_modelvariant",
    "benchmarks_workload",
    "benchmarks_benchmarkrun",
    "benchmarks_series",
    "benchmarks_metricvalue",
    "serving_inferencemetric",
    "api_ingestbatch",
)


def row_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in COUNTED_TABLES:
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
    return counts


def post_json(
    client: Client,
    path: str,
    body: Any,
    token: str | None,
    *,
    gzipped: bool = False,
    raw: bytes | None = None,
    **extra: Any,
) -> Any:
    data = raw if raw is not None else orjson.dumps(body)
    headers = dict(extra)
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    if gzipped:
        data = gzip.compress(data)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    content_type = headers.pop("content_type", "application/json")
    return client.post(path, data=data, content_type=content_type, **headers)


def telemetry_payload(
    *, n: int = 4, hostname: str = "gpu-node-01", batch_id: str | None = None, start: float | None = None
) -> dict[str, Any]:
    start = start if start is not None else time.time() - n
    samples = []
    for i in range(n):
        gpu = GPU_A if i % 2 == 0 else GPU_B
        samples.append(
            {
                "time": start + i // 2,
                "gpu": gpu,
                "power_w": 400.0 + i,
                "energy_mj": 1_000_000 + i * 400,
                "gpu_util": 97.0,
                "mem_util": 41.0,
                "mem_used_bytes": 61_203_283_968,
                "mem_total_bytes": 85_520_809_984,
                "sm_clock_mhz": 1980,
                "mem_clock_mhz": 2619,
                "temperature_c": 61,
                "throttle_reasons": 0,
                "ecc_errors": 0,
                "xid_errors": 0,
            }
        )
    return {
        "batch_id": batch_id or f"{hostname}:{uuid.uuid4()}",
        "host": {
            "hostname": hostname,
            "agent_version": "0.1.0",
            "driver_version": "550.54.15",
            "cuda_version": "12.4",
            "simulated": True,
            "facts": {"os": "Ubuntu 22.04"},
        },
        "accelerators": [
            {
                "uuid": GPU_A,
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 85_520_809_984,
                "power_limit_w": 700.0,
                "unsupported": ["power_instant"],
            },
            {
                "uuid": GPU_B,
                "index": 1,
                "name": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 85_520_809_984,
                "power_limit_w": 700.0,
            },
        ],  # fmt: skip
        "samples": samples,
    }


def run_payload(**overrides: Any) -> dict[str, Any]:
    payload = {
        "run_id": str(uuid.uuid4()),
        "model": "Llama-3.1-8B",
        "variant": {"name": "fp8", "precision": "fp8", "quantization_method": ""},
        "workload": {"scenario": "offline", "batch_size": 64, "concurrency": None, "input_length": 1024,
                     "output_length": 256, "framework": "vLLM", "framework_version": "0.6.3", "options": {}},
        "hardware": {"accelerator": "H100 SXM 80GB", "count": 1, "host": "gpu-node-01",
                     "gpu_uuids": [GPU_A], "driver_version": "550.54.15", "cuda_version": "12.4"},
        "provenance": {"git_commit": "a1b2c3d", "branch": "main", "ci_url": "https://ci.example.com/1",
                       "source_format": "agent-bench"},
        "started_at": "2025-11-29T21:00:00Z",
        "finished_at": "2025-11-29T21:05:00Z",
        "metrics": [{"name": "throughput_tokens_per_s", "value": 4890.0, "unit": "tokens/s",
                     "samples": [4881.2, 4893.0]}],
        "context": {"exit_status": 0},
    }  # fmt: skip
    payload.update(overrides)
    return payload


def inference_payload(**overrides: Any) -> dict[str, Any]:
    payload = {
        "batch_id": f"gpu-node-01:vllm:{uuid.uuid4().hex[:12]}",
        "host": "gpu-node-01",
        "intervals": [
            {"model": "Llama-3.1-8B", "variant": "fp8", "engine": "vllm", "accelerator_uuids": [GPU_A],
             "interval_start": "2025-11-29T22:00:00Z", "interval_s": 60, "requests": 1200, "errors": 3,
             "prompt_tokens": 1228800, "generated_tokens": 307200,
             "ttft_ms": {"p50": 85.0, "p99": 410.0}, "itl_ms": {"p50": 11.2, "p99": 38.0},
             "e2e_ms": {"p50": 2900.0, "p99": 7400.0},
             "histograms": {"ttft_seconds": [[0.05, 310], [0.1, 820], ["+Inf", 1200]]}}
        ],
    }  # fmt: skip
    payload.update(overrides)
    return payload


@pytest.fixture
def make_token() -> Callable[..., str]:
    def make(team: Team, kind: str) -> str:
        return token_create(team=team, kind=kind, name=f"test {kind}")[1]

    return make


@pytest.fixture
def ingest_token(team: Team, make_token: Callable[..., str]) -> str:
    return make_token(team, "ingest")


@pytest.fixture
def read_token(team: Team, make_token: Callable[..., str]) -> str:
    return make_token(team, "read")


@pytest.fixture
def rw_token(team: Team, make_token: Callable[..., str]) -> str:
    return make_token(team, "read-write")


@pytest.fixture
def other_token(other_team: Team, make_token: Callable[..., str]) -> str:
    return make_token(other_team, "read-write")
