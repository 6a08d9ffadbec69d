"""The scenario a run is stored under is what its file says, never a default (issue 33, class 5).

Every fixture of the importers is listed here with the scenario each of its runs states, so that a
new fixture (and with it a new format or shape) must say what its file tells. Through the import
plan, a run whose file states no scenario is stored as "not stated": an online serving benchmark
(vLLM ``request_rate`` inf, llmperf, genai-perf) must never land among the Offline runs.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.import_plans import import_plan
from accelboard.importers import ParsedRun, parse_bytes, parse_path

FIXTURES = Path(__file__).parent / "fixtures"

# fixture (a file or a folder of FIXTURES) -> the scenario of each of its runs, in parse order;
# "" where the file states none (stored as "unstated").
EXPECTED: dict[str, list[str]] = {
    # concurrency mode (input_config.concurrency): N requests in flight, online serving
    "aiperf": ["serving"],
    "genai_perf": ["serving"],
    # num_concurrent_requests: a closed loop against an endpoint
    "llmperf": ["serving"],
    "codecarbon_v1.csv": [""],
    "codecarbon_v3.csv": [""],
    "lm_eval_v03.json": [""],
    "lm_eval_v04.json": [""],
    # LoadGen's effective_scenario / "Scenario :" line
    "mlperf": ["single-stream"],
    "mlperf_llm": ["server", "offline"],
    "mlperf_server_old_summary.txt": ["server"],
    "nvidia_smi_multi.csv": [""],
    # scenario.name "inference" (fixed batches in the process, no server)
    "optimum_benchmark.json": ["offline"],
    "optimum_legacy": ["offline"],
    "pytest_benchmark.json": ["", ""],
    "training": ["training", "training"],
    "training_steps": ["training"],
    # request_rate "inf": everything sent at once through the server
    "vllm_2024.json": ["serving"],
    # request_rate 12.0: an arrival rate
    "vllm_2025.json": ["server"],
    # no request_rate in either record: nothing claimed
    "vllm_append.jsonl": ["", ""],
    "vllm_rate_inf.json": ["serving"],
    # Infinity (JSON's inf), then 4.0
    "vllm_sweep_rates.jsonl": ["serving", "server"],
}

# Where a stated scenario may come from: a file's key or line, the MLPerf folder, or a rule on
# what a file says (``derived:request_rate``); never "default".
_TRACEABLE = ("file:", "path", "derived:")


def _runs(name: str) -> list[ParsedRun]:
    return parse_path(FIXTURES / name)


def test_every_fixture_states_its_scenario_here() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_it_stores_the_scenario_the_file_says(name: str) -> None:
    runs = _runs(name)
    assert [run.workload.scenario for run in runs] == EXPECTED[name]
    for run in runs:
        if run.workload.scenario:
            assert run.workload.scenario in Scenario.values
            assert run.field_sources["workload.scenario"].startswith(_TRACEABLE)
        plan = import_plan(run, None)
        # what is stored is what the file says, or "not stated": never a guess
        assert plan.scenario == (run.workload.scenario or Scenario.UNSTATED.value)
        if plan.scenario == Scenario.OFFLINE:
            assert run.field_sources["workload.scenario"] != "default"


def test_a_vllm_serving_result_at_rate_inf_is_online_serving_not_offline() -> None:
    (run,) = _runs("vllm_rate_inf.json")
    assert (run.workload.scenario, run.workload.concurrency) == ("serving", 32)
    assert run.workload.options["request_rate"] == "inf"
    assert import_plan(run, None).scenario == "serving"


def test_a_file_that_states_no_scenario_is_stored_as_not_stated() -> None:
    (run,) = _runs("lm_eval_v04.json")
    plan = import_plan(run, None)
    assert plan.scenario == "unstated"
    assert plan.parsed.field_sources["workload.scenario"] == "default"
    # the uploader may still state it
    assert import_plan(run, {"scenario": "offline"}).scenario == "offline"


@pytest.mark.parametrize("name", ["vllm_rate_inf.json", "vllm_2025.json", "llmperf", "mlperf_llm"])
def test_the_scenario_is_the_same_whatever_the_uploads_shape(name: str) -> None:
    path = FIXTURES / name
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for file in files:
            archive.write(file, arcname=str(file.relative_to(FIXTURES)))
    as_zip = parse_bytes(buffer.getvalue(), filename="upload.zip")
    assert sorted(r.workload.scenario for r in as_zip) == sorted(EXPECTED[name])


def test_an_optimum_benchmark_scenario_it_does_not_know_claims_none(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "optimum_benchmark.json").read_text())
    config = data.get("config", data)
    config["scenario"]["name"] = "something-new"
    (run,) = parse_bytes(json.dumps(data).encode(), filename="benchmark.json")
    assert run.workload.scenario == ""


def test_jsons_infinity_rate_is_kept_as_inf_text_so_the_run_stays_plain_json() -> None:
    first, second = _runs("vllm_sweep_rates.jsonl")
    assert (first.workload.options["request_rate"], second.workload.options["request_rate"]) == ("inf", 4.0)
    json.dumps(first.to_dict(), allow_nan=False)  # accelboard parse prints JSON any reader takes
