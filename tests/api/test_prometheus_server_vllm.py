"""A real Prometheus (Debian's ``prometheus``) scrapes a vLLM ``/metrics`` page and remote-writes
to a real accelboard server; the stored serving intervals equal what the page's counters and
histograms advanced by between consecutive scrapes, through a server restart of vLLM (its
counters start over) and through accelboard being down and losing its answers (Prometheus sends
the same requests again: nothing is counted twice).

The page is this repository's own text, written after vLLM's (0.6 to 0.8) ``/metrics``: its metric
names, HELP texts, buckets and labels, prometheus_client's ``_created`` series included. Each GET
serves the next step ``k``; the vLLM server restarts at step ``RESTART`` (its life step ``j``
starts over at 1). Prometheus runs as in ``test_prometheus_server`` (skipped without it, unless CI).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelboard.api.services import token_create
from accelboard.serving.models import InferenceMetric
from tests.api import test_prometheus_server as dcgm_case
from tests.api.test_prometheus_server import Exporter, FlakyProxy, _start, _stop

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
RESTART = 5  # the step at which vLLM restarted
TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
TPOT_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
E2E_BOUNDS = [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
# Each step, four requests finish with these latencies (seconds).
TTFT_SEEN = [0.03, 0.07, 0.2, 0.9]
TPOT_SEEN = [0.02, 0.02, 0.04, 0.12]
E2E_SEEN = [1.8, 3.2, 4.1, 12.0]


def life(k: int) -> int:
    """Steps since the vLLM server started: it restarted at ``RESTART``."""
    return k if k < RESTART else k - RESTART + 1


def counters(j: int) -> dict[str, float]:
    generated = 100 * j + j * j
    return {
        "prompt": 4 * generated + 50 * j,
        "generated": generated,
        "stop": 3 * j,
        "length": j,
        "abort": j // 2,
    }


def exposition(k: int) -> str:
    j, c, m = life(k), counters(life(k)), f'model_name="{MODEL}"'
    started = 1_764_450_000.0 + 1000 * (k >= RESTART)
    lines = [
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{m}}} {3.0 + k % 2}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{m}}} 0.0",
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        f"vllm:gpu_cache_usage_perc{{{m}}} 0.{k % 10}",
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{m}}} {float(c['prompt'])}",
        f"vllm:prompt_tokens_created{{{m}}} {started}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{m}}} {float(c['generated'])}",
        f"vllm:generation_tokens_created{{{m}}} {started}",
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
    ]
    for reason in ("stop", "length", "abort"):
        lines.append(f'vllm:request_success_total{{finished_reason="{reason}",{m}}} {float(c[reason])}')
        lines.append(f'vllm:request_success_created{{finished_reason="{reason}",{m}}} {started}')
    for name, help_text, bounds, seen in (
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BOUNDS, TTFT_SEEN),
        ("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT_BOUNDS,
         TPOT_SEEN),
        ("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", E2E_BOUNDS,
         E2E_SEEN),
    ):  # fmt: skip
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for bound in [*bounds, math.inf]:
            le = "+Inf" if bound == math.inf else str(bound)
            lines.append(f'{name}_bucket{{le="{le}",{m}}} {float(j * sum(1 for v in seen if v <= bound))}')
        lines.append(f"{name}_count{{{m}}} {float(j * len(seen))}")
        lines.append(f"{name}_sum{{{m}}} {j * sum(seen)}")
        lines.append(f"{name.removesuffix('_seconds')}_seconds_created{{{m}}} {started}")
    return "\n".join(lines) + "\n"


def expected(k: int) -> dict[str, Any]:
    """The interval from step ``k`` to step ``k + 1``: what the page's counters advanced by (the
    new values after the restart)."""
    after, before = counters(life(k + 1)), counters(life(k))
    reset = life(k + 1) < life(k)
    delta = {key: after[key] - (0 if reset else before[key]) for key in after}
    return {
        "generated_tokens": delta["generated"],
        "prompt_tokens": delta["prompt"],
        "requests": delta["stop"] + delta["length"] + delta["abort"],
        "errors": delta["abort"],
    }


@pytest.fixture
def prometheus(live_server: Any, team: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    binary = dcgm_case.prometheus_binary.__wrapped__()  # the same skip (or CI failure) without it
    token = token_create(team=team, kind="ingest", name="prometheus")[1]
    page = Exporter(exposition)  # vLLM's /metrics, a step each GET
    proxy = FlakyProxy(live_server.url, down=2, lost=3)
    config = f"""
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:{page.port}"]
        labels:
          node: vllm-node-01
remote_write:
  - url: {proxy.url}/api/v1/prometheus/write
    authorization:
      credentials: {token}
    metadata_config:
      send: false
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 300ms
      min_backoff: 100ms
      max_backoff: 500ms
"""
    process = _start(binary, config, tmp_path)
    try:
        yield {"page": page, "proxy": proxy, "process": process, "log": tmp_path / "prometheus.log"}
    finally:
        _stop(process, page, proxy)


def test_prometheus_remote_writes_what_vllm_counted_once_per_interval(prometheus: dict[str, Any]) -> None:
    page, proxy = prometheus["page"], prometheus["proxy"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(page.served) < RESTART + 4:
        assert prometheus["process"].poll() is None, prometheus["log"].read_text()
        time.sleep(0.5)
    with page.lock:
        page.frozen = True
    served = list(page.served)
    while time.monotonic() < deadline and InferenceMetric.objects.count() < len(served) - 1:
        time.sleep(0.5)
    time.sleep(2)  # late resends would show now
    log = (proxy.log, prometheus["log"].read_text())
    assert [step for step, _ in proxy.log[:5]] == ["down"] * 2 + ["lost"] * 3, log
    rows = list(
        InferenceMetric.objects.order_by("interval_start").values(
            "generated_tokens", "prompt_tokens", "requests", "errors", "ttft_p50_ms", "ttft_p99_ms",
            "itl_p50_ms", "e2e_p50_ms", "histograms", "interval_s", "engine", "variant__name", "host__hostname",
        )
    )  # fmt: skip
    # One interval per pair of consecutive scrapes, each what the page advanced by.
    assert [
        {key: row[key] for key in ("generated_tokens", "prompt_tokens", "requests", "errors")} for row in rows
    ] == [expected(k) for k in served[:-1]], (served, log)
    for row in rows:
        assert (row["engine"], row["variant__name"], row["host__hostname"]) == (
            "vllm",
            "bf16",
            "vllm-node-01",
        )
        assert row["interval_s"] == 1
        # Each interval saw the four requests of one step (also across the restart: its new counts).
        # TTFT p50: rank 2 in (0.06, 0.08]: 0.08; p99: rank 3.96 in (0.75, 1.0]: 0.75 + 0.25 * 0.96.
        assert (row["ttft_p50_ms"], row["ttft_p99_ms"]) == (80.0, 990.0)
        # TPOT p50: rank 2 in (0.01, 0.025] holding 2: 0.01 + 0.015 * 2/2; e2e p50: rank 2 in
        # (2.5, 5] holding 1.8's successors 3.2 and 4.1 (counts 1 -> 3): 2.5 + 2.5 * (2-1)/(3-1).
        assert (row["itl_p50_ms"], row["e2e_p50_ms"]) == (25.0, 3750.0)
        assert row["histograms"]["ttft_seconds"][-1] == ["+Inf", 4]
