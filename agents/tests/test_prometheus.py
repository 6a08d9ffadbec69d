"""Prometheus text parsing, percentiles from buckets, vLLM name mapping, and the scrape command."""

from __future__ import annotations

import math
import threading

import pytest

from accelboard_agent.cli import main
from accelboard_agent.prometheus import (
    histogram_quantile,
    interval_build,
    parse_exposition,
    snapshot_delta,
    vllm_snapshot,
)


def vllm_text(
    *,
    requests: int,
    aborted: int = 0,
    tokens: int,
    ttft: dict,
    itl_name: str = "inter_token_latency_seconds",
    model: str = "Llama-3.1-8B",
) -> str:
    lines = [
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{finished_reason="stop",model_name="{model}"}} {requests - aborted}.0',
        f'vllm:request_success_total{{finished_reason="abort",model_name="{model}"}} {aborted}.0',
        f'vllm:prompt_tokens_total{{model_name="{model}"}} {tokens * 4}.0',
        f'vllm:generation_tokens_total{{model_name="{model}"}} {tokens}.0 1764454200000',
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    for le, count in ttft.items():
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{le}",model_name="{model}"}} {count}.0')
    lines.append(f'vllm:time_to_first_token_seconds_count{{model_name="{model}"}} {ttft["+Inf"]}.0')
    lines.append(f'vllm:{itl_name}_bucket{{le="0.01",model_name="{model}"}} {tokens // 2}.0')
    lines.append(f'vllm:{itl_name}_bucket{{le="+Inf",model_name="{model}"}} {tokens}.0')
    lines.append("vllm:num_requests_running 3")
    return "\n".join(lines) + "\n"


def test_it_parses_labels_escapes_special_values_and_timestamps():
    text = (
        "# HELP x A metric\n"
        'x{path="a\\"b\\\\c",le="+Inf"} +Inf 1764454200000\n'
        "up NaN\n"
        'y{a="1", b="two"} -3.5e2\n'
    )

    samples = parse_exposition(text)

    assert samples[0].labels == (("path", 'a"b\\c'), ("le", "+Inf"))
    assert samples[0].value == math.inf
    assert math.isnan(samples[1].value)
    assert samples[2].label("b") == "two" and samples[2].value == -350.0


def test_it_names_the_line_of_a_malformed_sample():
    with pytest.raises(ValueError, match="line 2: "):
        parse_exposition("ok 1\nbroken{le=0.1} 3\n")


def test_it_interpolates_percentiles_inside_buckets_as_prometheus_does():
    buckets = {0.1: 10.0, 0.5: 60.0, 1.0: 90.0, math.inf: 100.0}

    assert histogram_quantile(0.05, buckets) == pytest.approx(0.05)
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.42)
    assert histogram_quantile(0.9, buckets) == pytest.approx(1.0)
    # Only known to be above the highest finite bound.
    assert histogram_quantile(0.99, buckets) == 1.0
    assert histogram_quantile(0.5, {0.1: 0.0, math.inf: 0.0}) is None


def test_it_maps_the_older_itl_name_and_counts_aborts_as_errors():
    old = vllm_snapshot(
        parse_exposition(
            vllm_text(
                requests=10,
                aborted=2,
                tokens=100,
                ttft={"0.1": 5, "+Inf": 10},
                itl_name="time_per_output_token_seconds",
            )
        )
    )

    snapshot = old["Llama-3.1-8B"]
    assert snapshot.counters["requests"] == 10 and snapshot.counters["errors"] == 2
    assert snapshot.histograms["itl"] == {0.01: 50.0, math.inf: 100.0}


def test_it_turns_counter_and_bucket_deltas_into_an_interval():
    before = vllm_snapshot(
        parse_exposition(vllm_text(requests=100, tokens=1000, ttft={"0.1": 50, "0.5": 90, "+Inf": 100}))
    )
    after = vllm_snapshot(
        parse_exposition(
            vllm_text(requests=300, aborted=3, tokens=5000, ttft={"0.1": 150, "0.5": 270, "+Inf": 300})
        )
    )

    delta = snapshot_delta(before["Llama-3.1-8B"], after["Llama-3.1-8B"])
    item = interval_build(
        model="Llama-3.1-8B",
        variant="fp8",
        delta=delta,
        start=1764454200.0,
        seconds=15.0,
        accelerator_uuids=["GPU-a"],
    )

    assert item["requests"] == 200 and item["errors"] == 3
    assert item["generated_tokens"] == 4000 and item["prompt_tokens"] == 16000
    assert item["interval_start"] == "2025-11-29T22:10:00Z" and item["interval_s"] == 15
    # 200 new: 100 under 0.1 s, 80 more under 0.5 s, 20 above: p50 = 0.1 s, p99 in +Inf -> 0.5 s.
    assert item["ttft_ms"] == {"p50": 100.0, "p99": 500.0}
    assert item["histograms"]["ttft_seconds"] == [[0.1, 100], [0.5, 180], ["+Inf", 200]]


def test_it_treats_a_counter_that_went_down_as_a_restart():
    before = vllm_snapshot(
        parse_exposition(vllm_text(requests=500, tokens=9000, ttft={"0.1": 400, "+Inf": 500}))
    )
    after = vllm_snapshot(parse_exposition(vllm_text(requests=20, tokens=300, ttft={"0.1": 10, "+Inf": 20})))

    delta = snapshot_delta(before["Llama-3.1-8B"], after["Llama-3.1-8B"])

    assert delta.counters["requests"] == 20 and delta.counters["generated_tokens"] == 300
    assert delta.histograms["ttft"] == {0.1: 10.0, math.inf: 20.0}


def test_the_scrape_command_ships_intervals_to_the_server(tmp_path, server):
    server.metrics_text = vllm_text(requests=10, tokens=100, ttft={"0.1": 5, "+Inf": 10})

    def advance() -> None:
        # After the first scrape, the engine serves 40 more requests.
        server.wait_for(lambda: False, timeout=0.5)
        server.metrics_text = vllm_text(requests=50, tokens=900, ttft={"0.1": 25, "+Inf": 50})

    threading.Thread(target=advance, daemon=True).start()
    code = main(
        [
            "scrape", "--url", server.url + "/metrics", "--interval", "1", "--count", "1",
            "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db"),
            "--variant", "fp8", "--gpus", "GPU-a", "--labels", "track=canary, version=v2",
        ]
    )  # fmt: skip

    stored = server.stored("/api/v1/inference-metrics")
    assert code == 0
    assert len(stored) == 1
    interval = stored[0]["intervals"][0]
    assert stored[0]["host"] and stored[0]["batch_id"].split(":")[1] == "vllm"
    assert len(stored[0]["batch_id"]) <= 64 and interval["interval_s"] == 1
    assert interval["model"] == "Llama-3.1-8B" and interval["variant"] == "fp8"
    assert interval["requests"] == 40 and interval["generated_tokens"] == 800
    assert interval["accelerator_uuids"] == ["GPU-a"]
    assert interval["labels"] == {"track": "canary", "version": "v2"}
    assert interval["ttft_ms"]["p50"] == 100.0
