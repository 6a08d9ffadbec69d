"""A canary check from Prometheus alone: vLLM's series, received by remote-write, carry their
deployment labels (``track``) into the serving intervals, which the canary endpoint compares."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from accelboard.api.services import token_create
from accelboard.benchmarks.models import Model
from accelboard.canary.services import canary_check_create
from accelboard.serving.models import InferenceMetric
from tests.fleet.prom_wire import snappy, write_request

pytestmark = pytest.mark.django_db

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCRAPES = 11  # ten intervals per deployment: the fewest a verdict takes
# TTFT bucket deltas per interval (<=0.1, <=0.5, <=1, +Inf), before the k % 3 wobble: the stable
# deployment's median lies in (0.1, 0.5], the canary's in (0.5, 1].
TTFT = {"stable": (4, 10, 12, 12), "canary": (0, 3, 12, 12)}
HOSTS = {"stable": "stable-node", "canary": "canary-node"}


def _scrape(track: str, ms: int, k: int) -> list[tuple[dict[str, str], list]]:
    """Scrape ``k`` (0: the baseline) of one deployment: its counters' totals after k intervals."""
    base = {
        "model_name": MODEL,
        "instance": f"{HOSTS[track]}:8000",
        "variant": "fp8",
        "track": track,
        "pod": f"chat-{track}-7d9f",  # not an allow-listed label: not kept
        "job": "vllm",
    }
    totals = [0, 0, 0, 0]
    for i in range(k):
        for b, count in enumerate(TTFT[track]):
            totals[b] += count + (i % 3 if b else 0)
    series = [
        ({"__name__": "vllm:generation_tokens_total", **base}, [(ms, 3000.0 * k)]),
        ({"__name__": "vllm:request_success_total", "finished_reason": "stop", **base}, [(ms, 12.0 * k)]),
    ]
    for le, total in zip(("0.1", "0.5", "1.0", "+Inf"), totals, strict=True):
        series.append(
            ({"__name__": "vllm:time_to_first_token_seconds_bucket", "le": le, **base}, [(ms, float(total))])
        )
    return series


def test_a_canary_check_works_from_remote_write_alone(client: Client, team: Any) -> None:
    ingest = token_create(team=team, kind="ingest", name="prometheus")[1]
    read = token_create(team=team, kind="read", name="argo")[1]
    t0 = int(time.time() * 1000) - (SCRAPES + 1) * 60_000
    for k in range(SCRAPES):
        ms = t0 + k * 60_000
        response = client.post(
            "/api/v1/prometheus/write",
            data=snappy(write_request([*_scrape("stable", ms, k), *_scrape("canary", ms, k)])),
            content_type="application/x-protobuf",
            HTTP_CONTENT_ENCODING="snappy",
            HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION="0.1.0",
            HTTP_AUTHORIZATION=f"Bearer {ingest}",
        )
        assert response.status_code == 200, response.content
    # Two labelled deployments of one variant, each on its own host, ten intervals each.
    rows = InferenceMetric.objects.values_list("host__hostname", "variant__name", "labels")
    assert sorted({(h, v, tuple(labels.items())) for h, v, labels in rows}) == [
        ("canary-node", "fp8", (("track", "canary"),)),
        ("stable-node", "fp8", (("track", "stable"),)),
    ]
    assert InferenceMetric.objects.filter(labels={"track": "canary"}).count() == SCRAPES - 1
    assert InferenceMetric.objects.filter(labels={"track": "stable"}).count() == SCRAPES - 1
    # First stable interval: deltas 4, 10, 12, 12; p50 rank 6 in (0.1, 0.5]: 0.1 + 0.4 * 2/6 s.
    first = InferenceMetric.objects.filter(labels={"track": "stable"}).order_by("interval_start").first()
    assert first is not None and first.ttft_p50_ms == pytest.approx(233.333, abs=1e-3)

    canary_check_create(
        team=team,
        model=Model.objects.get(name=MODEL),
        name="chat-fp8-rollout",
        baseline={"track": "stable"},
        canary={"track": "canary"},
        window_minutes=60,
    )
    answer = client.get("/api/v1/canary/chat-fp8-rollout", HTTP_AUTHORIZATION=f"Bearer {read}").json()
    assert (answer["baseline"]["intervals"], answer["canary"]["intervals"]) == (SCRAPES - 1, SCRAPES - 1)
    ttft = answer["metrics"]["ttft_p50_ms"]
    assert (ttft["n_baseline"], ttft["n_canary"], ttft["verdict"]) == (SCRAPES - 1, SCRAPES - 1, "fail")
    # Same tokens and requests per interval on both sides: no difference there.
    assert answer["metrics"]["error_rate"]["verdict"] == "pass"
    assert answer["verdict"] == "fail" and answer["failed_metrics"] == ["ttft_p50_ms"]
