"""NVIDIA AIPerf and GenAI-Perf summaries, and optimum-benchmark's 2023 layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelboard.importers import ParseError, detect, parse_bytes, parse_files, parse_path


def _metrics(run) -> dict[str, float]:
    return {m.name: m.value for m in run.metrics}


def test_it_reads_an_aiperf_summary(fixtures: Path):
    (run,) = parse_path(fixtures / "aiperf/profile_export_aiperf.json")
    assert run.source_format == "aiperf"
    metrics = _metrics(run)
    assert metrics["throughput_requests_per_s"] == 15.62
    assert metrics["throughput_tokens_per_s"] == 3998.7
    assert metrics["latency_p99_ms"] == 5102.7 and metrics["ttft_p50_ms"] == 140.8
    # AIPerf's inter_token_latency is each request's (latency - TTFT) / (tokens - 1): vLLM's TPOT
    assert metrics["tpot_p99_ms"] == 18.4 and "itl_p99_ms" not in metrics
    assert run.metric("tpot_p99_ms").source == "file:profile_export_aiperf.json:inter_token_latency.p99"
    assert metrics["error_rate"] == pytest.approx(5 / 505)
    assert metrics["wall_time_s"] == 32.01
    assert run.model == "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8" and run.variant.precision == "fp8"
    assert (run.workload.concurrency, run.workload.input_length, run.workload.output_length) == (64, 550, 256)
    assert run.workload.scenario == "serving"  # a closed loop of 64 requests: online serving
    assert run.started_at == "2025-06-12T09:15:02.123456Z"
    # DCGM saw two H100s; GPU 1 never worked: the run is one GPU, its power GPU 0's
    assert (run.hardware.accelerator, run.hardware.count, run.hardware.host) == (
        "NVIDIA H100 80GB HBM3",
        1,
        "gpu-node-7",
    )
    assert metrics["power_avg_w"] == 612.4 and metrics["gpu_util_avg_pct"] == 87.2
    assert run.context["idle_gpus"] == ["localhost:9400/1"]


def test_it_reads_an_aiperf_folder_as_one_run(fixtures: Path):
    # the JSON claims the CSV of the same run
    (run,) = parse_path(fixtures / "aiperf")
    assert run.source_file.endswith("profile_export_aiperf.json")


def test_it_reads_the_aiperf_csv_alone_with_its_thousands_separators(fixtures: Path):
    (run,) = parse_path(fixtures / "aiperf/profile_export_aiperf.csv")
    metrics = _metrics(run)
    assert metrics["latency_mean_ms"] == 4023.5 and metrics["latency_p99_ms"] == 5102.7  # "4,023.50"
    assert metrics["throughput_tokens_per_s"] == 3998.7 and metrics["ttft_p90_ms"] == 210.5
    assert "ttft_p25_ms" not in metrics  # an empty cell is no value
    assert run.model == ""


def test_it_reads_the_newer_aiperf_config_and_telemetry_names(fixtures: Path):
    data = json.loads((fixtures / "aiperf/profile_export_aiperf.json").read_text())
    data["schema_version"] = "1.5"
    data["input_config"] = {
        "models": {"items": [{"name": "meta-llama/Llama-3.1-8B-Instruct"}]},
        "endpoint": {"streaming": True},
        "phases": [{"type": "request_rate", "request_rate": 20.0, "duration": 60}],
    }
    for gpu in data["telemetry_data"]["endpoints"]["localhost:9400"]["gpus"].values():
        gpu["metrics"] = {f"nvidia_{name}": block for name, block in gpu["metrics"].items()}
    (run,) = parse_bytes(json.dumps(data).encode(), filename="profile_export_aiperf.json")
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert run.workload.scenario == "server" and run.workload.options["request_rate"] == 20.0
    assert run.hardware.count == 1 and _metrics(run)["power_avg_w"] == 612.4


def test_it_rejects_an_aiperf_latency_in_an_unknown_unit(fixtures: Path):
    data = json.loads((fixtures / "aiperf/profile_export_aiperf.json").read_text())
    data["request_latency"]["unit"] = "fortnights"
    with pytest.raises(ParseError) as error:
        parse_bytes(json.dumps(data).encode(), filename="profile_export_aiperf.json")
    assert error.value.key == "request_latency.unit"


def test_it_reads_a_genai_perf_summary(fixtures: Path):
    (run,) = parse_path(fixtures / "genai_perf/profile_export_genai_perf.json")
    assert run.source_format == "genai-perf"
    metrics = _metrics(run)
    assert metrics["throughput_requests_per_s"] == 3.4512 and metrics["throughput_tokens_per_s"] == 1720.5
    assert (
        metrics["ttft_p99_ms"] == 420.6
        and metrics["tpot_p50_ms"] == 8.8
        and metrics["latency_p25_ms"] == 4510.9
    )
    assert metrics["output_tokens_per_s_per_user_mean"] == 112.7
    assert run.model == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"
    assert (run.variant.precision, run.variant.quantization_method, run.model_suffix) == (
        "int4",
        "AWQ",
        "AWQ-INT4",
    )
    assert (run.workload.concurrency, run.workload.input_length, run.workload.output_length) == (16, 200, 500)
    # backend "tensorrtllm" is GenAI-Perf's default, meaningless for an OpenAI endpoint
    assert run.workload.framework == ""
    assert (run.hardware.accelerator, run.hardware.count) == ("", None)


def test_it_leaves_token_timings_out_of_a_non_streaming_genai_perf_run(fixtures: Path):
    data = json.loads((fixtures / "genai_perf/profile_export_genai_perf.json").read_text())
    data["input_config"].update(streaming=False, service_kind="triton", backend="vllm")
    (run,) = parse_bytes(json.dumps(data).encode(), filename="profile_export_genai_perf.json")
    names = set(_metrics(run))
    assert not any(name.startswith(("ttft_", "tpot_")) for name in names) and "latency_p99_ms" in names
    assert run.workload.framework == "vLLM"


def test_it_reads_the_genai_perf_csv_alone_and_its_folder_name(fixtures: Path, tmp_path: Path):
    folder = tmp_path / "hugging-quants_Meta-Llama-3.1-70B-Instruct-AWQ-INT4-openai-chat-concurrency16"
    folder.mkdir()
    csv = folder / "profile_export_genai_perf.csv"
    csv.write_bytes((fixtures / "genai_perf/profile_export_genai_perf.csv").read_bytes())
    (run,) = parse_path(csv)
    metrics = _metrics(run)
    assert metrics["latency_p99_ms"] == 5102.9 and metrics["throughput_tokens_per_s"] == 1720.5
    assert metrics["throughput_requests_per_s"] == 3.45
    assert run.workload.concurrency == 16 and run.field_sources["workload.concurrency"] == "path:concurrency"
    assert (
        run.model == "hugging-quants_Meta-Llama-3.1-70B-Instruct-AWQ-INT4"
        and run.field_sources["model"] == "path"
    )
    assert (run.workload.input_length, run.workload.output_length) == (200, 499)  # measured means


def test_it_detects_the_exports_by_content(fixtures: Path):
    for name, fmt in {
        "aiperf/profile_export_aiperf.json": "aiperf",
        "aiperf/profile_export_aiperf.csv": "aiperf",
        "genai_perf/profile_export_genai_perf.json": "genai-perf",
        "genai_perf/profile_export_genai_perf.csv": "genai-perf",
        "optimum_legacy/pytorch_llama_awq/inference_results.csv": "optimum-benchmark",
    }.items():
        data = (fixtures / name).read_bytes()
        assert detect(data, name=Path(name).name) == fmt, name
    # without their names: the AIPerf JSON by its schema keys, the GenAI-Perf JSON by its config
    assert detect((fixtures / "aiperf/profile_export_aiperf.json").read_bytes(), name="x.json") == "aiperf"
    assert (
        detect((fixtures / "genai_perf/profile_export_genai_perf.json").read_bytes(), name="x.json")
        == "genai-perf"
    )


def test_it_reads_optimum_benchmarks_2023_layout(fixtures: Path):
    (run,) = parse_path(fixtures / "optimum_legacy")
    metrics = _metrics(run)
    # a generative model: forward is the prefill (TTFT), generate the request
    assert metrics["ttft_mean_ms"] == pytest.approx(41.2) and metrics["latency_mean_ms"] == pytest.approx(
        3120.0
    )
    assert metrics["throughput_tokens_per_s"] == 41.0  # 4 x 32 tokens / 3.12 s
    assert metrics["memory_peak_bytes"] == 15890e6  # the larger of forward/generate, MB = 1e6 bytes
    assert run.context["forward.throughput(samples/s)"] == 97.1  # prefill samples/s: kept, not a result
    assert run.model == "TheBloke/Llama-2-13B-AWQ"
    assert (run.variant.precision, run.variant.quantization_method) == ("int4", "AWQ")
    assert run.field_sources["variant.precision"] == "file:hydra_config.yaml:backend.quantization_config.bits"
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA A10G", 1)  # device cuda:0
    assert (run.workload.batch_size, run.workload.input_length, run.workload.output_length) == (4, 256, 32)
    assert run.hardware.cpu == "AMD EPYC 7R32" and run.workload.framework == "pytorch"


def test_it_reads_optimums_config_from_the_hydra_folder_and_refuses_bad_yaml(fixtures: Path, tmp_path: Path):
    run_dir = tmp_path / "exp"
    (run_dir / ".hydra").mkdir(parents=True)
    source = fixtures / "optimum_legacy/pytorch_llama_awq"
    (run_dir / "inference_results.csv").write_bytes((source / "inference_results.csv").read_bytes())
    config = (source / "hydra_config.yaml").read_text().replace("device: cuda:0", "device: cuda")
    (run_dir / ".hydra/config.yaml").write_text(config)
    (run,) = parse_path(run_dir)
    assert run.hardware.count == 4 and any("environment.gpus" in w for w in run.warnings)
    (run_dir / ".hydra/config.yaml").write_text(
        config.replace("  torch_dtype: float16", "  torch_dtype: &x float16")
    )
    with pytest.raises(ParseError) as error:
        parse_path(run_dir)
    assert error.value.line == 13 and error.value.file.endswith(".hydra/config.yaml")  # torch_dtype


def test_it_groups_the_loose_files_of_an_optimum_experiment(fixtures: Path):
    source = fixtures / "optimum_legacy/pytorch_llama_awq"
    files = [(name, (source / name).read_bytes()) for name in ("inference_results.csv", "hydra_config.yaml")]
    submission = parse_files(files)
    assert submission.errors == [] and [r.model for r in submission.runs] == ["TheBloke/Llama-2-13B-AWQ"]
    alone = parse_files(files[1:])
    assert alone.runs == [] and "optimum-benchmark experiment configuration" in str(alone.errors[0])
