"""vLLM and Triton series as serving intervals, without the database (accelboard/serving/remote_write.py).
The expected figures are worked by hand in the comments."""

from __future__ import annotations

import math

import pytest

from accelboard.fleet.remote_write import Series, WriteRejected
from accelboard.serving.remote_write import (
    Accumulated,
    ServingNames,
    accumulated_read,
    deployment_labels,
    histogram_quantile,
    instance_host,
    interval_fields,
    parts_build,
    series_deltas,
    serving_extract,
    variant_of,
)

T0 = 1_764_454_200_000  # ms
T1 = T0 + 15_000
T2 = T1 + 15_000
NAMES = ServingNames()
NOW = T0 + 60_000
VLLM = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "instance": "gpu-node-07:8000", "job": "vllm"}


def vllm(metric: str, samples: list[tuple[int, float]], **labels: str) -> Series:
    return Series({"__name__": metric, **VLLM, **labels}, list(samples))


def scrape_pair() -> list[Series]:
    """Two scrapes of one vLLM server, 15 s apart."""
    return [
        vllm("vllm:prompt_tokens_total", [(T0, 1000), (T1, 1600)]),
        vllm("vllm:generation_tokens_total", [(T0, 500), (T1, 800)]),
        vllm("vllm:request_success_total", [(T0, 10), (T1, 14)], finished_reason="stop"),
        vllm("vllm:request_success_total", [(T0, 1), (T1, 2)], finished_reason="abort"),
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 5), (T1, 7)], le="0.1"),
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 9), (T1, 15)], le="0.5"),
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 10), (T1, 18)], le="+Inf"),
        vllm("vllm:e2e_request_latency_seconds_sum", [(T0, 20.0), (T1, 26.5)]),
        vllm("vllm:e2e_request_latency_seconds_count", [(T0, 10), (T1, 18)]),
        vllm("vllm:num_requests_running", [(T0, 3), (T1, 4)]),  # a gauge: not read
    ]


def fields_of(series: list[Series], state: dict[str, tuple[int, float]] | None = None) -> list[dict]:
    deltas, _ = series_deltas(serving_extract(series, names=NAMES, now_ms=NOW), state or {})
    out = []
    for (target, start), part in sorted(parts_build(deltas).items(), key=lambda item: item[0][1]):
        total = Accumulated(interval_s=part.interval_s, engine=target.engine)
        total.add(part)
        out.append({"target": target, "start": start, **interval_fields(total)})
    return out


def test_counters_and_histograms_become_one_interval_between_two_scrapes() -> None:
    (item,) = fields_of(scrape_pair())
    assert (item["target"].host, item["target"].engine, item["target"].model) == (
        "gpu-node-07", "vllm", "meta-llama/Llama-3.1-8B-Instruct",
    )  # fmt: skip
    assert item["target"].variant == "bf16"  # no variant label, no precision in the name: the default
    assert (item["start"], item["interval_s"]) == (T0, 15)
    # 1600-1000, 800-500, (14-10)+(2-1) finished of which the abort one is the error
    assert (item["prompt_tokens"], item["generated_tokens"], item["requests"], item["errors"]) == (
        600,
        300,
        5,
        1,
    )
    # TTFT bucket deltas: <=0.1: 2, <=0.5: 6, +Inf: 8. p50: rank 4 in (0.1, 0.5]: 0.1 + 0.4 * (4-2)/(6-2)
    # = 0.3 s; p99: rank 7.92 in +Inf: the highest finite bound, 0.5 s.
    assert item["histograms"] == {"ttft_seconds": [[0.1, 2], [0.5, 6], ["+Inf", 8]]}
    assert item["ttft_ms"] == {"p50": 300.0, "p99": 500.0}
    # e2e: 6.5 s over 8 requests (mean 812.5 ms); no buckets, so no percentiles.
    assert item["latency_sums"] == {"e2e_seconds": [6.5, 8]}
    assert "e2e_ms" not in item


def test_a_series_sent_once_per_sample_is_read_in_time_order() -> None:
    # Prometheus writes each sample as a series of its own; here out of order too.
    series = [
        vllm("vllm:generation_tokens_total", [(T2, 900)]),
        vllm("vllm:generation_tokens_total", [(T0, 500)]),
        vllm("vllm:generation_tokens_total", [(T1, 800)]),
    ]
    first, second = fields_of(series)
    assert [(i["start"], i["generated_tokens"]) for i in (first, second)] == [(T0, 300), (T1, 100)]


def test_a_counter_that_goes_down_was_reset_and_its_new_value_is_the_delta() -> None:
    series = [vllm("vllm:generation_tokens_total", [(T0, 500), (T1, 800), (T2, 120)])]
    first, second = fields_of(series)
    assert (first["generated_tokens"], second["generated_tokens"]) == (300, 120)


def test_a_histogram_with_one_bucket_reset_is_reset_whole() -> None:
    # The server restarted between T0 and T1: <=0.1 and +Inf went down; <=0.05 went up 1 -> 2,
    # but its 2 are counted since the restart: deltas 2, 3, 3 (not 1, 3, 3).
    series = [
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 1), (T1, 2)], le="0.05"),
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 7), (T1, 3)], le="0.1"),
        vllm("vllm:time_to_first_token_seconds_bucket", [(T0, 18), (T1, 3)], le="+Inf"),
    ]
    (item,) = fields_of(series)
    assert item["histograms"] == {"ttft_seconds": [[0.05, 2], [0.1, 3], ["+Inf", 3]]}
    # p50: rank 1.5 in (0, 0.05]: 0.05 * 1.5/2 = 37.5 ms; p99: rank 2.97 in (0.05, 0.1]:
    # 0.05 + 0.05 * (2.97-2)/1 = 98.5 ms
    assert item["ttft_ms"] == {"p50": 37.5, "p99": 98.5}


def test_samples_not_newer_than_the_state_are_ignored_and_the_state_moves_to_the_newest() -> None:
    extracted = serving_extract(
        [vllm("vllm:prompt_tokens_total", [(T0, 900), (T1, 1000), (T2, 1300)])], names=NAMES, now_ms=NOW
    )
    key = extracted[0].key
    # Stored state at T1 (1000): T0 is out of order, T1 the same sample again; only T2 counts.
    deltas, updated = series_deltas(extracted, {key: (T1, 1000.0)})
    assert [(d.start_ms, d.end_ms, d.delta) for d in deltas] == [(T1, T2, 300.0)]
    assert updated == {key: (T2, 1300.0)}
    # The same request again: nothing, and no state to write.
    assert series_deltas(extracted, {key: (T2, 1300.0)}) == ([], {})
    # A sample over a day after the state is a new baseline.
    late = serving_extract(
        [vllm("vllm:prompt_tokens_total", [(T0 + 86_400_001, 5000)])], names=NAMES, now_ms=T2 + 86_400_000
    )
    assert series_deltas(late, {key: (T0, 900.0)}) == ([], {key: (T0 + 86_400_001, 5000.0)})
    # A series' first sample is its baseline: no delta, only state.
    first = serving_extract([vllm("vllm:prompt_tokens_total", [(T0, 900)])], names=NAMES, now_ms=NOW)
    assert series_deltas(first, {}) == ([], {key: (T0, 900.0)})


def test_parts_of_one_interval_add_up_whatever_request_carried_them() -> None:
    # One scrape's series sent in two requests: each part computed alone, added to the row.
    series = scrape_pair()
    parts = []
    for half in (series[:5], series[5:]):
        deltas, _ = series_deltas(serving_extract(half, names=NAMES, now_ms=NOW), {})
        (part,) = parts_build(deltas).values()
        parts.append(part)
    total = Accumulated(interval_s=15)
    total.add(parts[0])
    first = interval_fields(total)
    assert first["histograms"] == {"ttft_seconds": [[0.1, 2]]} and first["ttft_ms"] == {
        "p50": None,
        "p99": None,
    }
    # The row as stored, read back, and the second part added: the whole interval.
    stored = accumulated_read({**first, "engine": "vllm", "ttft_p50_ms": None, "ttft_p99_ms": None})
    stored.add(parts[1])
    (whole,) = fields_of(series)
    assert {k: v for k, v in interval_fields(stored).items()} == {
        k: v for k, v in whole.items() if k not in ("target", "start")
    }


def test_triton_counters_durations_and_summaries() -> None:
    labels = {"model": "resnet50-int8", "version": "1", "Hostname": "triton-01", "instance": "10.0.0.9:8002"}

    def triton(metric: str, samples: list[tuple[int, float]], **more: str) -> Series:
        return Series({"__name__": metric, **labels, **more}, samples)

    series = [
        triton("nv_inference_request_success", [(T0, 100), (T1, 110)]),
        triton("nv_inference_request_failure", [(T0, 2), (T1, 3)], reason="BACKEND"),
        triton("nv_inference_count", [(T0, 400), (T1, 440)]),
        triton("nv_inference_exec_count", [(T0, 50), (T1, 55)]),
        triton("nv_inference_request_duration_us", [(T0, 5_000_000), (T1, 5_600_000)]),
        triton("nv_inference_queue_duration_us", [(T0, 100_000), (T1, 150_000)]),
        triton("nv_inference_compute_infer_duration_us", [(T0, 3_000_000), (T1, 3_400_000)]),
        triton("nv_inference_compute_input_duration_us", [(T0, 10_000), (T1, 20_000)]),
        triton("nv_inference_request_summary_us", [(T0, 40_000), (T1, 52_000)], quantile="0.5"),
        triton("nv_inference_request_summary_us", [(T0, 90_000), (T1, 99_000)], quantile="0.99"),
    ]
    (item,) = fields_of(series)
    target = item["target"]
    # Hostname before instance; the model's name states int8: its variant.
    assert (target.host, target.engine, target.model, target.variant) == (
        "triton-01",
        "triton",
        "resnet50-int8",
        "int8",
    )
    # requests: 10 successful + 1 failed; durations over the 10 successful: e2e 0.6 s (60 ms mean),
    # queue 0.05 s, compute 0.4 + 0.01 s.
    assert (item["requests"], item["errors"]) == (11, 1)
    assert item["latency_sums"] == {
        "compute_seconds": [0.41, 10], "e2e_seconds": [0.6, 10], "queue_seconds": [0.05, 10],
        "inferences": 40, "executions": 5,
    }  # fmt: skip
    # A summary's quantiles are Triton's own (its window), the newest sample's: 52 ms and 99 ms.
    assert item["e2e_ms"] == {"p50": 52.0, "p99": 99.0}


def test_labels_name_host_and_variant() -> None:
    assert instance_host("gpu-node-07:8000") == "gpu-node-07"
    assert instance_host("[fd00::7]:8000") == "fd00::7"
    assert instance_host("gpu-node-07") == "gpu-node-07"
    assert variant_of("Qwen/Qwen2.5-72B-Instruct-FP8", {}, NAMES) == "fp8"
    assert variant_of("Qwen/Qwen2.5-72B-Instruct-FP8", {"variant": "fp8-dynamic"}, NAMES) == "fp8-dynamic"
    assert variant_of("mistral-7b", {}, ServingNames(default_variant="fp16")) == "fp16"
    # The inter-token latency under its older name (time_per_output_token) fills itl_ms.
    series = [
        vllm("vllm:time_per_output_token_seconds_bucket", [(T0, 0), (T1, 10)], le="0.02"),
        vllm("vllm:time_per_output_token_seconds_bucket", [(T0, 0), (T1, 10)], le="+Inf"),
    ]
    (item,) = fields_of(series)
    assert item["itl_ms"] == {"p50": 10.0, "p99": 19.8}  # 0.02 * 5/10, 0.02 * 9.9/10


@pytest.mark.parametrize(
    ("series", "named"),
    [
        (Series({"__name__": "vllm:prompt_tokens_total", "instance": "n:1"}, [(T0, 1.0)]), "'model_name'"),
        (vllm("vllm:prompt_tokens_total", [(T0, math.inf)]), "inf at"),
        (vllm("vllm:e2e_request_latency_seconds_sum", [(T0, math.nan)]), "nan at"),
        (Series({"__name__": "nv_inference_count", "model": "m"}, [(T0, 1.0)]), "names no host"),
        (vllm("vllm:prompt_tokens_total", [(NOW + 300_001, 1.0)]), "in the future"),
        (vllm("vllm:prompt_tokens_total", [(T0, 1.0)], track="c" * 64), "deployment label 'track'"),
        (vllm("vllm:prompt_tokens_total", [(T0, 1.0)], track="canary\n"), "deployment label 'track'"),
    ],
)
def test_bad_series_are_refused_naming_them(series: Series, named: str) -> None:
    with pytest.raises(WriteRejected) as caught:
        serving_extract([series], names=NAMES, now_ms=NOW)
    assert named in caught.value.message and series.name in caught.value.message


def test_deployment_labels_are_the_allow_listed_ones_the_series_agree_on() -> None:
    # exported_ first (the target's own label renamed by Prometheus), an empty value is no label,
    # pod is not allow-listed; Triton's version is its model's version, not the deployment's.
    labels = {"exported_track": "canary", "track": "x", "deployment": "", "version": "v2", "pod": "p-1"}
    assert deployment_labels(labels, NAMES, "vllm") == {"track": "canary", "version": "v2"}
    assert deployment_labels(labels, NAMES, "triton") == {"track": "canary"}
    assert deployment_labels(labels, ServingNames(deployment=("pod",)), "vllm") == {"pod": "p-1"}
    # One interval's series: its labels are the pairs they all hold.
    series = [
        vllm("vllm:generation_tokens_total", [(T0, 500), (T1, 800)], track="canary", version="v2"),
        vllm("vllm:prompt_tokens_total", [(T0, 50), (T1, 80)], track="canary", version="v2"),
    ]
    deltas, _ = series_deltas(serving_extract(series, names=NAMES, now_ms=NOW), {})
    ((_, part),) = parts_build(deltas).items()
    assert part.labels == {"track": "canary", "version": "v2"}
    # Two deployments of one variant on one host share the interval row: it names neither.
    series[1] = vllm("vllm:prompt_tokens_total", [(T0, 50), (T1, 80)], track="stable", version="v2")
    deltas, _ = series_deltas(serving_extract(series, names=NAMES, now_ms=NOW), {})
    ((_, part),) = parts_build(deltas).items()
    assert part.labels == {"version": "v2"}
    assert (part.counters["generated_tokens"], part.counters["prompt_tokens"]) == (300, 30)


def test_histogram_quantile_edges() -> None:
    assert histogram_quantile(0.5, {}) is None
    assert histogram_quantile(0.5, {0.1: 3}) is None  # no +Inf bucket
    assert histogram_quantile(0.5, {0.1: 0, math.inf: 0}) is None  # no observation
    assert histogram_quantile(0.5, {math.inf: 4}) is None  # all above no finite bound
    # Counts going down towards higher bounds are raised: {0.1: 4, 0.2: 2 -> 4, +Inf: 4}
    assert histogram_quantile(0.5, {0.1: 4, 0.2: 2, math.inf: 4}) == pytest.approx(0.05)
