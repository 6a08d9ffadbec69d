"""vLLM, llmperf, optimum-benchmark, pytest-benchmark, lm-eval, CodeCarbon and nvidia-smi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelboard.importers import ContextError, ParseError, UnrecognisedFormat, detect, parse_bytes, parse_path


def _metrics(run) -> dict[str, float]:
    return {m.name: m.value for m in run.metrics}


def test_it_detects_every_fixture_by_content(fixtures: Path):
    expected = {
        "vllm_2024.json": "vllm-serving",
        "vllm_2025.json": "vllm-serving",
        "vllm_append.jsonl": "vllm-serving",
        "llmperf/llama3_550_150_summary.json": "llmperf",
        "optimum_benchmark.json": "optimum-benchmark",
        "pytest_benchmark.json": "pytest-benchmark",
        "lm_eval_v04.json": "lm-eval",
        "lm_eval_v03.json": "lm-eval",
        "codecarbon_v1.csv": "codecarbon",
        "codecarbon_v3.csv": "codecarbon",
        "nvidia_smi_multi.csv": "nvidia-smi",
        "mlperf_server_old_summary.txt": "mlperf-inference",
        "training/Acme/results/acme-dgx/resnet/result_0.txt": "mlperf-training",
    }
    for name, fmt in expected.items():
        # renamed, so that only the content can tell
        assert detect((fixtures / name).read_bytes(), name="upload.bin") == fmt, name


def test_it_lists_what_it_tried_for_an_unknown_file():
    with pytest.raises(UnrecognisedFormat) as error:
        detect(b"hello,world\n1,2\n", name="notes.csv")
    assert "vllm-serving" in error.value.tried and "codecarbon" in error.value.tried
    assert "notes.csv" in str(error.value)


def test_it_reads_vllm_2024_files_with_per_request_arrays(fixtures: Path):
    run = parse_path(fixtures / "vllm_2024.json")[0]
    metrics = _metrics(run)
    assert metrics["latency_mean_ms"] == 120.0  # 2024's mean_latency_ms is the e2e latency
    assert metrics["throughput_input_tokens_per_s"] == 150.0
    assert run.metric("ttft_mean_ms").samples == pytest.approx([10.0, 20.0, 30.0])
    assert run.metric("itl_mean_ms").samples == pytest.approx([5.0, 6.0, 4.0])
    assert run.metric("ttft_p99_ms").raw_unit == "ms"
    # precision from the model id, hardware from the --metadata key
    assert (run.variant.precision, run.variant.quantization_method) == ("int4", "AWQ")
    assert run.field_sources["variant.precision"] == "model-name"
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA L40S", 4)
    assert run.workload.options["request_rate"] == "inf"


def test_it_reads_vllm_2025_files_and_the_colon_goodput_key(fixtures: Path):
    run = parse_path(fixtures / "vllm_2025.json")[0]
    metrics = _metrics(run)
    assert metrics["goodput_requests_per_s"] == 8.7
    assert metrics["latency_p90_ms"] == 1800.0 and metrics["itl_p99_ms"] == 38.0
    assert metrics["error_rate"] == pytest.approx(0.01)
    assert run.model == "Qwen2.5-7B-Instruct-FP8-dynamic" and run.context["model_path"].startswith("/models/")
    assert run.workload.concurrency == 64 and run.variant.precision == "fp8"


def test_it_reads_vllm_json_lines_with_seconds_keys(fixtures: Path):
    runs = parse_path(fixtures / "vllm_append.jsonl")
    assert [r.metric("throughput_requests_per_s").value for r in runs] == [4.0, 8.0]
    assert _metrics(runs[0])["ttft_p50_ms"] == 250.0  # median_ttft (no suffix) is seconds
    assert runs[1].workload.concurrency == 16


def test_it_rejects_a_truncated_vllm_file_with_the_line(fixtures: Path):
    text = (fixtures / "vllm_2025.json").read_text()
    with pytest.raises(ParseError) as error:
        parse_bytes(text[: len(text) // 2].encode(), filename="vllm.json", fmt="vllm-serving")
    assert error.value.line == text[: len(text) // 2].count("\n") + 1


def test_it_reads_llmperf_summaries_with_their_responses(fixtures: Path):
    run = parse_path(fixtures / "llmperf")[0]  # the directory: the responses are a companion
    metrics = _metrics(run)
    assert metrics["ttft_p99_ms"] == pytest.approx(300.0)
    assert metrics["latency_min_ms"] == pytest.approx(2400.0)  # "2.4" written as a string
    assert metrics["throughput_requests_per_s"] == pytest.approx(2.0)
    assert metrics["throughput_tokens_per_s"] == 400.0
    assert run.metric("ttft_mean_ms").samples == pytest.approx(
        [180.0, 220.0]
    )  # the failed request is left out
    assert (run.workload.concurrency, run.workload.input_length, run.workload.output_length) == (8, 550, 150)


def test_it_reads_optimum_benchmark_reports(fixtures: Path, tmp_path: Path):
    run = parse_path(fixtures / "optimum_benchmark.json")[0]
    metrics = _metrics(run)
    assert metrics["ttft_p50_ms"] == pytest.approx(51.0)
    assert metrics["itl_mean_ms"] == pytest.approx(20.0)
    assert metrics["throughput_tokens_per_s"] == 210.0
    assert metrics["energy_per_token_j"] == pytest.approx(3.6e6 / 6_000_000)
    assert metrics["memory_peak_bytes"] == pytest.approx(15500.25e6)  # process VRAM, MB = 1e6 bytes
    assert metrics["load_time_ms"] == 12500.0
    assert (run.variant.precision, run.variant.quantization_method) == ("int4", "AWQ")
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA A10G", 1)
    assert (run.workload.batch_size, run.workload.input_length, run.workload.output_length) == (4, 256, 64)
    # the split layout: benchmark_report.json next to benchmark_config.json
    data = json.loads((fixtures / "optimum_benchmark.json").read_text())
    (tmp_path / "benchmark_report.json").write_text(json.dumps(data["report"]))
    (tmp_path / "benchmark_config.json").write_text(json.dumps(data["config"]))
    split = parse_path(tmp_path)
    assert len(split) == 1 and split[0].model == "TheBloke/Llama-2-7B-AWQ"
    assert _metrics(split[0]) == metrics


def test_it_reads_pytest_benchmark_entries_as_runs(fixtures: Path):
    first, second = parse_path(fixtures / "pytest_benchmark.json")
    assert first.model == "resnet50" and first.variant.precision == "fp16"
    assert first.hardware.accelerator == "NVIDIA L4" and first.workload.batch_size == 32
    assert _metrics(first)["latency_p50_ms"] == pytest.approx(10.8)
    assert first.metric("latency_mean_ms").samples == pytest.approx([10.1, 10.5, 10.8, 11.1, 13.0])
    assert first.context["git_commit"] == "a1b2c3d4e5"
    assert second.model == "tests/test_perf.py::test_tokenize"
    assert _metrics(second)["throughput_ops_per_s"] == 4000.0


def test_it_reads_lm_eval_v04_and_v03_accuracy(fixtures: Path):
    run = parse_path(fixtures / "lm_eval_v04.json")[0]
    results = {(a.task, a.metric): a for a in run.accuracy}
    assert results[("arc_easy", "acc")].stderr == pytest.approx(0.0088)
    assert results[("arc_easy", "acc_norm")].stderr is None  # "N/A"
    assert results[("gsm8k", "exact_match,strict-match")].n_shot == 5
    assert results[("wikitext", "word_perplexity")].higher_is_better is False
    assert run.metric("accuracy:wikitext:word_perplexity").direction == "lower"
    assert (run.variant.precision, run.variant.quantization_method) == ("fp16", "GPTQ")
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA H100 80GB HBM3", 2)
    assert run.hardware.cuda_version == "12.4" and run.workload.batch_size == 16
    old = parse_path(fixtures / "lm_eval_v03.json")[0]
    assert old.model == "EleutherAI/pythia-1.4b" and old.variant.precision == "bf16"
    assert _metrics(old)["accuracy:hellaswag:acc_norm"] == 0.67


def test_it_reads_codecarbon_generations_by_column_name(fixtures: Path, tmp_path: Path):
    v1 = parse_path(fixtures / "codecarbon_v1.csv")[0]
    assert _metrics(v1) == {
        "wall_time_s": 3600.0,
        "energy_j": pytest.approx(360000.0),
        "emissions_gco2e": pytest.approx(47.5),
    }
    v3 = parse_path(
        fixtures / "codecarbon_v3.csv", context={"model": "Llama-3.1-8B", "precision": "bfloat16"}
    )[0]
    assert (v3.hardware.accelerator, v3.hardware.count) == ("NVIDIA A100-SXM4-40GB", 4)
    assert _metrics(v3)["energy_gpu_j"] == pytest.approx(0.825 * 3.6e6)
    assert _metrics(v3)["power_gpu_avg_w"] == 1650.0
    assert v3.model == "Llama-3.1-8B" and v3.variant.precision == "bf16"
    assert v3.field_sources["variant.precision"] == "user"
    cut = tmp_path / "emissions.csv"
    cut.write_text((fixtures / "codecarbon_v3.csv").read_text()[:-200])
    with pytest.raises(ParseError) as error:
        parse_path(cut)
    assert error.value.line == 2


def test_it_reads_nvidia_smi_logs_as_telemetry(fixtures: Path):
    run = parse_path(fixtures / "nvidia_smi_multi.csv")[0]
    assert len(run.telemetry) == 6
    gap = run.telemetry[1]
    assert gap.gpu_index == 1 and gap.values["power_w"] is None and gap.values["gpu_util"] is None
    assert run.telemetry[0].values["mem_used_bytes"] == 60000 * 1024 * 1024
    # GPU 1 never works (utilisation [N/A], 0, 0 %): the run still held both GPUs (both cost money),
    # its utilisation and power figures are GPU 0's, never an average with the idle one.
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA H100 80GB HBM3", 2)
    assert run.field_sources["hardware.count"] == "file:nvidia_smi_multi.csv:index"
    assert run.context["idle_gpus"] == ["1"] and run.context["active_gpus"] == 1
    # The header's fields, units dropped (it once stored the busy GPUs' names under this key).
    assert run.context["columns"] == [
        "timestamp",
        "name",
        "index",
        "utilization.gpu",
        "memory.used",
        "power.draw",
        "temperature.gpu",
        "clocks.sm",
    ]
    metrics = _metrics(run)
    # trapezoid of GPU 0 (600, 700, 650 W one second apart) = 650 + 675 = 1325 J
    assert metrics["energy_j"] == pytest.approx(1325.0)
    assert metrics["power_avg_w"] == pytest.approx((600 + 700 + 650) / 3)
    assert metrics["gpu_util_avg_pct"] == pytest.approx((95 + 97 + 96) / 3)
    assert metrics["memory_used_peak_bytes"] == 61500 * 1024 * 1024
    idle = run.context["per_gpu"]["1"]
    assert (idle["power_avg_w"], idle["energy_j"], idle["util_max_pct"]) == (100.0, 100.0, 0.0)


def test_it_rejects_bad_nvidia_smi_cells_with_the_line(fixtures: Path):
    text = (fixtures / "nvidia_smi_multi.csv").read_text().replace("700.00 W", "seven hundred W")
    with pytest.raises(ParseError) as error:
        parse_bytes(text.encode(), filename="smi.csv")
    assert error.value.line == 4 and "power.draw" in error.value.message


def test_it_keeps_the_file_value_when_the_context_disagrees(fixtures: Path):
    run = parse_path(fixtures / "vllm_2024.json", context={"accelerator": "H100", "branch": "main"})[0]
    assert run.hardware.accelerator == "NVIDIA L40S"
    assert any("context says 'H100'" in w for w in run.warnings)
    assert run.context["branch"] == "main" and run.field_sources["context.branch"] == "user"


def test_it_rejects_bad_context_values(fixtures: Path):
    with pytest.raises(ContextError, match="batch_size"):
        parse_path(fixtures / "vllm_2024.json", context={"batch_size": "lots"})
    with pytest.raises(ContextError, match="precision"):
        parse_path(fixtures / "vllm_2024.json", context={"precision": "fp7"})


def test_it_claims_no_scenario_that_a_serving_file_does_not_state(fixtures: Path):
    # a finite request_rate is an arrival process at a rate (LoadGen's Server); "inf" sends every
    # request at once through the server: online serving, never Offline; no rate claims nothing
    assert [r.workload.scenario for r in parse_path(fixtures / "vllm_2025.json")] == ["server"]
    assert (
        parse_path(fixtures / "vllm_2025.json")[0].field_sources["workload.scenario"]
        == "derived:request_rate"
    )
    assert [r.workload.scenario for r in parse_path(fixtures / "vllm_2024.json")] == ["serving"]
    assert [r.workload.scenario for r in parse_path(fixtures / "vllm_append.jsonl")] == ["", ""]
    (llm,) = parse_path(fixtures / "llmperf")  # a closed loop of N requests in flight
    assert llm.workload.scenario == "serving"
    assert llm.field_sources["workload.scenario"] == "derived:num_concurrent_requests"


def test_it_names_the_cpu_key_the_file_has(fixtures: Path, tmp_path: Path):
    run = parse_path(fixtures / "pytest_benchmark.json")[0]
    assert run.field_sources["hardware.cpu"] == "file:pytest_benchmark.json:machine_info.cpu.brand_raw"
    data = json.loads((fixtures / "pytest_benchmark.json").read_text())
    del data["machine_info"]["cpu"]["brand_raw"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    run = parse_path(old)[0]
    assert (run.hardware.cpu, run.field_sources["hardware.cpu"]) == (
        "x86_64",
        "file:old.json:machine_info.processor",
    )


def test_it_puts_lm_eval_fractions_and_scores_apart(fixtures: Path):
    run = parse_path(fixtures / "lm_eval_v04.json")[0]
    units = {m.name.split(":", 2)[2]: m.unit for m in run.metrics}
    assert units["acc"] == units["exact_match,strict-match"] == "ratio"
    assert units["word_perplexity"] == units["bits_per_byte"] == "score"
    acc = next(a for a in run.accuracy if (a.task, a.metric) == ("arc_easy", "acc"))
    assert acc.unit == "ratio" and float(acc.raw) == acc.value


@pytest.mark.parametrize(
    ("model", "base", "suffix", "precision", "method"),
    [
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "RedHatAI/Meta-Llama-3.1-8B-Instruct", "FP8", "fp8", ""),
        ("Qwen2.5-7B-Instruct-FP8-dynamic", "Qwen2.5-7B-Instruct", "FP8-dynamic", "fp8", ""),
        ("TheBloke/Llama-2-13B-AWQ", "TheBloke/Llama-2-13B", "AWQ", "int4", "AWQ"),
        ("Qwen/Qwen2-7B-Instruct-GPTQ-Int8", "Qwen/Qwen2-7B-Instruct", "GPTQ-Int8", "int8", "GPTQ"),
        (
            "org/Llama-3.1-8B-Instruct-quantized.w4a16",
            "org/Llama-3.1-8B-Instruct",
            "quantized.w4a16",
            "int4",
            "",
        ),
        ("unsloth/llama-3-8b-bnb-4bit", "unsloth/llama-3-8b", "bnb-4bit", "int4", "bitsandbytes"),
        # an MLPerf accuracy target and a plain model are no quantisation
        ("llama2-70b-99.9", "", "", "", ""),
        ("meta-llama/Llama-2-70b-chat-hf", "", "", "", ""),
    ],
)
def test_it_reads_the_variant_from_the_model_names_suffix(model, base, suffix, precision, method):
    body = {"model_id": model, "request_throughput": 1.0, "mean_ttft_ms": 10.0}
    (run,) = parse_bytes(json.dumps(body).encode(), filename="result.json")
    assert run.model == model  # the raw name is kept as read, for a catalogue to resolve
    assert (run.model_base, run.model_suffix) == (base, suffix)
    assert (run.variant.precision, run.variant.quantization_method) == (precision, method)
    if precision:
        assert run.field_sources["variant.precision"] == "model-name"


def test_it_sums_the_power_of_busy_gpus_and_keeps_each_gpu_apart():
    text = (
        "timestamp, index, name, utilization.gpu [%], power.draw [W]\n"
        "2025/01/10 12:00:00.000, 0, NVIDIA L40S, 90 %, 300.00 W\n"
        "2025/01/10 12:00:00.000, 1, NVIDIA L40S, 80 %, 250.00 W\n"
        "2025/01/10 12:00:01.000, 0, NVIDIA L40S, 95 %, 340.00 W\n"
        "2025/01/10 12:00:01.000, 1, NVIDIA L40S, 85 %, 200.00 W\n"
    )
    (run,) = parse_bytes(text.encode(), filename="smi.csv")
    metrics = _metrics(run)
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA L40S", 2)
    assert metrics["power_avg_w"] == pytest.approx(320.0 + 225.0)  # the run's draw: per-GPU means summed
    assert metrics["power_max_w"] == pytest.approx(550.0)  # the largest pass: 300 + 250 (540 after)
    assert metrics["energy_j"] == pytest.approx(320.0 + 225.0)  # one second each
    assert metrics["gpu_util_avg_pct"] == pytest.approx((92.5 + 82.5) / 2)
    assert run.context["per_gpu"]["1"]["power_avg_w"] == 225.0 and "idle_gpus" not in run.context
