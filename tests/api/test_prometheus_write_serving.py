"""POST /api/v1/prometheus/write: vLLM's and Triton's series into serving intervals, through the
inference-metrics ingest, over several requests (accelboard/serving/remote_write_services.py)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from django.test import Client

from accelboard.api.services import prometheus_write_ingest
from accelboard.costs.models import ServingCostDaily
from accelboard.costs.serving_cost_services import serving_cost_day_compute
from accelboard.fleet.models import Host, PrometheusUnknownMetric, TelemetryRollup, TelemetrySample
from accelboard.fleet.rollup_services import telemetry_rollups_drain
from accelboard.serving.models import InferenceMetric, PrometheusSeriesState
from tests.api.conftest import row_counts
from tests.fleet.prom_wire import STALE_NAN, snappy, write_request

pytestmark = pytest.mark.django_db

URL = "/api/v1/prometheus/write"
VLLM = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "instance": "gpu-node-07:8000", "job": "vllm"}
GPU = {"UUID": "GPU-sv-0001", "Hostname": "gpu-node-07", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}


def _post(client: Client, series: list[tuple[dict[str, str], list]], token: str) -> Any:
    return client.post(
        URL,
        data=snappy(write_request(series)),
        content_type="application/x-protobuf",
        HTTP_CONTENT_ENCODING="snappy",
        HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION="0.1.0",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def _vllm(ms: int, tokens: int, requests: int, ttft: tuple[int, int, int], **labels: str) -> list:
    """One scrape of a vLLM server: counters at these totals, TTFT buckets <=0.1, <=0.5, +Inf."""
    base = {**VLLM, **labels}
    out = [
        ({"__name__": "vllm:prompt_tokens_total", **base}, [(ms, 4.0 * tokens)]),
        ({"__name__": "vllm:generation_tokens_total", **base}, [(ms, float(tokens))]),
        (
            {"__name__": "vllm:request_success_total", "finished_reason": "stop", **base},
            [(ms, float(requests))],
        ),
        ({"__name__": "vllm:request_success_total", "finished_reason": "abort", **base}, [(ms, 1.0)]),
        ({"__name__": "vllm:num_requests_running", **base}, [(ms, 3.0)]),
    ]
    for le, count in zip(("0.1", "0.5", "+Inf"), ttft, strict=True):
        out.append(
            ({"__name__": "vllm:time_to_first_token_seconds_bucket", "le": le, **base}, [(ms, float(count))])
        )
    return out


def _rows() -> list[dict[str, Any]]:
    return list(
        InferenceMetric.objects.order_by("interval_start").values(
            "interval_s", "requests", "errors", "prompt_tokens", "generated_tokens", "ttft_p50_ms", "ttft_p99_ms",
            "engine", "variant__name", "variant__precision", "host__hostname", "accelerator_uuids", "histograms",
        )
    )  # fmt: skip


def test_vllm_counters_become_intervals_across_requests_once_each(
    client: Client, ingest_token: str, team: Any
) -> None:
    t0 = int(time.time() * 1000) - 120_000
    t1, t2, t3 = t0 + 15_000, t0 + 30_000, t0 + 45_000
    dcgm = ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}, [(t0, 350.0)])
    # The first scrape is every series' baseline: no interval yet, the GPU registered by dcgm-exporter.
    response = _post(client, [*_vllm(t0, 1000, 10, (5, 9, 10)), dcgm], ingest_token)
    assert response.status_code == 200, response.content
    assert InferenceMetric.objects.count() == 0 and TelemetrySample.objects.count() == 1
    assert PrometheusSeriesState.objects.filter(team=team).count() == 7  # the gauge is not kept
    # The gauge is unknown; the vLLM series it reads are not.
    assert dict(PrometheusUnknownMetric.objects.values_list("name", "samples")) == {
        "vllm:num_requests_running": 1
    }
    # The second: the interval t0 -> t1.
    second = _vllm(t1, 1300, 14, (7, 15, 18))
    assert _post(client, second, ingest_token).status_code == 200
    expected = {
        "interval_s": 15, "requests": 4, "errors": 0, "prompt_tokens": 1200, "generated_tokens": 300,
        "ttft_p50_ms": 300.0, "ttft_p99_ms": 500.0, "engine": "vllm", "variant__name": "bf16",
        "variant__precision": "bf16", "host__hostname": "gpu-node-07", "accelerator_uuids": ["GPU-sv-0001"],
        "histograms": {"ttft_seconds": [[0.1, 2], [0.5, 6], ["+Inf", 8]]},
    }  # fmt: skip
    assert _rows() == [expected]
    assert InferenceMetric.objects.get().interval_start.timestamp() * 1000 == t0
    # Sent again (Prometheus lost the answer): nothing twice.
    counts = row_counts()
    assert _post(client, second, ingest_token).status_code == 200
    assert row_counts() == counts and _rows() == [expected]
    # The server restarted: the counters went down, their new values are the interval's.
    assert _post(client, _vllm(t2, 200, 3, (1, 2, 2)), ingest_token).status_code == 200
    restarted = _rows()[1]
    assert (restarted["generated_tokens"], restarted["prompt_tokens"], restarted["requests"]) == (200, 800, 3)
    assert restarted["histograms"] == {"ttft_seconds": [[0.1, 1], [0.5, 2], ["+Inf", 2]]}
    # A late sample (t1 + 5 s, older than the state at t2): ignored.
    assert _post(client, _vllm(t1 + 5_000, 9999, 99, (50, 60, 70)), ingest_token).status_code == 200
    assert len(_rows()) == 2 and _rows()[1] == restarted
    # The t3 scrape split over two requests (Prometheus's shards): one interval, each part once.
    third = _vllm(t3, 260, 5, (2, 4, 5))
    assert _post(client, third[:3], ingest_token).status_code == 200
    assert _post(client, third[3:], ingest_token).status_code == 200
    assert _post(client, third[:3], ingest_token).status_code == 200  # and a part sent again
    last = _rows()[2]
    # 260-200 tokens, 5-3 requests; TTFT deltas 1, 2, 3: p50 rank 1.5 in (0.1, 0.5]: 0.1 + 0.4 * 0.5/1
    assert (last["generated_tokens"], last["prompt_tokens"], last["requests"]) == (60, 240, 2)
    assert (last["ttft_p50_ms"], last["histograms"]) == (
        300.0,
        {"ttft_seconds": [[0.1, 1], [0.5, 2], ["+Inf", 3]]},
    )


def test_triton_series_become_intervals_with_duration_sums(client: Client, ingest_token: str) -> None:
    t0 = int(time.time() * 1000) - 60_000
    labels = {"model": "resnet50", "version": "1", "instance": "triton-01:8002", "variant": "fp16-trt"}

    def scrape(ms: int, k: int) -> list:
        return [
            ({"__name__": "nv_inference_request_success", **labels}, [(ms, 100.0 + 10 * k)]),
            ({"__name__": "nv_inference_request_failure", "reason": "BACKEND", **labels}, [(ms, 2.0 + k)]),
            ({"__name__": "nv_inference_request_duration_us", **labels}, [(ms, 5e6 + 6e5 * k)]),
            ({"__name__": "nv_inference_queue_duration_us", **labels}, [(ms, 1e5 + 5e4 * k)]),
        ]

    assert _post(client, scrape(t0, 0), ingest_token).status_code == 200
    assert _post(client, scrape(t0 + 10_000, 1), ingest_token).status_code == 200
    row = InferenceMetric.objects.select_related("variant", "host").get()
    assert (row.engine, row.variant.name, row.variant.precision, row.host.hostname) == (
        "triton", "fp16-trt", "fp16", "triton-01",
    )  # fmt: skip
    assert (row.requests, row.errors, row.interval_s) == (11, 1, 10)
    # 0.6 s of request time and 0.05 s of queue over the 10 successful requests.
    assert row.latency_sums == {"e2e_seconds": [0.6, 10], "queue_seconds": [0.05, 10]}
    assert row.accelerator_uuids == []  # no GPU of the team's on that host


def test_bad_serving_series_are_refused_naming_them_and_nothing_is_stored(
    client: Client, ingest_token: str, team: Any
) -> None:
    t0 = int(time.time() * 1000) - 60_000
    dcgm = ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}, [(t0, 350.0)])
    assert _post(client, _vllm(t0, 1000, 10, (5, 9, 10)), ingest_token).status_code == 200
    counts, state = row_counts(), list(PrometheusSeriesState.objects.values_list("key", "last_ms"))
    cases = [
        ({"__name__": "vllm:generation_tokens_total", **VLLM}, [(t0 + 15_000, float("inf"))], "not_finite"),
        ({"__name__": "vllm:generation_tokens_total", "instance": "gpu-node-07:8000"}, [(t0 + 15_000, 5.0)],
         "'model_name'"),
        # A variant the team never registered whose name states no precision: the inference API's refusal.
        ({"__name__": "vllm:generation_tokens_total", **VLLM, "variant": "prod"}, [(t0, 1.0), (t0 + 15_000, 5.0)],
         "variant 'prod'"),
    ]  # fmt: skip
    for labels, samples, named in cases:
        response = _post(
            client, [*_vllm(t0 + 15_000, 1300, 14, (7, 15, 18)), dcgm, (labels, samples)], ingest_token
        )
        assert response.status_code == 400, response.content
        message = response.json()["error"]["message"]
        assert named in message or response.json()["error"]["code"] == named, message
        assert "vllm:generation_tokens_total{" in message
        # Nothing of the request: no telemetry, no interval, no state moved.
        assert row_counts() == counts
        assert list(PrometheusSeriesState.objects.values_list("key", "last_ms")) == state
    # The stale marker of a series that ended is no value: skipped, the rest stored.
    stale = (
        {"__name__": "vllm:generation_tokens_total", **VLLM, "variant": "prod"},
        [(t0 + 15_000, STALE_NAN)],
    )
    assert _post(client, [*_vllm(t0 + 15_000, 1300, 14, (7, 15, 18)), stale], ingest_token).status_code == 200
    assert InferenceMetric.objects.get().generated_tokens == 300
    # Named by serving only: the token's team's own host of that name (host names are per team).
    assert Host.objects.get(hostname="gpu-node-07").team_id == team.pk


def test_cost_inputs_per_token_come_from_prometheus_alone(
    client: Client, ingest_token: str, team: Any
) -> None:
    """dcgm-exporter's and vLLM's series of one host, as one Prometheus sends them: the serving
    cost joins the intervals' tokens with the GPU's energy, no agent involved."""
    now = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    if (now + timedelta(minutes=6)).date() != now.date():
        now -= timedelta(minutes=10)
    t0 = int(now.timestamp() * 1000)
    for k in range(21):  # 5 minutes of 15 s scrapes; the GPU draws 500 W (7.5 kJ a scrape)
        ms = t0 + 15_000 * k
        dcgm = [
            ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}, [(ms, 500.0)]),
            ({"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **GPU}, [(ms, 9e9 + 7_500_000.0 * k)]),
            ({"__name__": "DCGM_FI_DEV_GPU_UTIL", **GPU}, [(ms, 90.0)]),
        ]
        assert (
            _post(client, [*dcgm, *_vllm(ms, 3000 * k, 10 * k, (k, 2 * k, 3 * k))], ingest_token).status_code
            == 200
        )
    telemetry_rollups_drain()
    assert serving_cost_day_compute(day=now.date()) == 1
    row = ServingCostDaily.objects.get()
    # 20 intervals of 3,000 generated tokens (4 prompt tokens each), 10 requests each.
    assert (row.generated_tokens, row.prompt_tokens, row.requests) == (60_000, 240_000, 200)
    # The GPU's energy over the 5 minutes: 500 W x 300 s = 150 kJ, as its minute rollups count it.
    energy_j = TelemetryRollup.objects.filter(width_s=60).aggregate(total=Sum("energy_j"))["total"]
    assert energy_j == pytest.approx(150_000, rel=0.2)
    assert row.energy_kwh == pytest.approx(energy_j / 3.6e6)
    assert row.energy_per_token_j == pytest.approx(energy_j / 60_000)
    assert row.gpu_hours > 0


@pytest.mark.django_db(transaction=True)
def test_two_parts_of_one_interval_stored_at_once_make_one_row_with_both(
    team: Any, ingest_token: str
) -> None:
    """The first part's transaction is held open after its store; the second, in another
    connection, waits for it (the team and host's lock), then adds to its row instead of
    replacing it."""
    t0 = int(time.time() * 1000) - 60_000
    assert _post(Client(), _vllm(t0, 1000, 10, (5, 9, 10)), ingest_token).status_code == 200
    scrape = _vllm(t0 + 15_000, 1300, 14, (7, 15, 18))
    first_stored, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                results["first"] = prometheus_write_ingest(team=team, body=snappy(write_request(scrape[:2])))
                first_stored.set()
                release.wait(10)
        finally:
            connection.close()

    def second() -> None:
        try:
            results["second"] = prometheus_write_ingest(team=team, body=snappy(write_request(scrape[2:])))
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert first_stored.wait(10)
    threads[1].start()
    threads[1].join(1.0)
    assert threads[1].is_alive()  # waiting for the first part's transaction
    release.set()
    for thread in threads:
        thread.join(20)
    assert set(results) == {"first", "second"}
    (row,) = _rows()
    assert (row["prompt_tokens"], row["generated_tokens"], row["requests"], row["ttft_p50_ms"]) == (
        1200,
        300,
        4,
        300.0,
    )
