"""``accelboard parse`` through ``python -m accelboard.cli``: output, exit codes, no database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _parse(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env["ACCELBOARD_HOME"] = str(home)  # where an embedded PostgreSQL would appear if one started
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "accelboard.cli", "parse", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_it_prints_runs_as_json_without_a_database(fixtures: Path, tmp_path: Path):
    result = _parse(
        str(fixtures / "vllm_2025.json"),
        str(fixtures / "mlperf"),
        "--context",
        "team=infra",
        home=tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [r["source_format"] for r in runs] == ["vllm-serving", "mlperf-inference"]
    assert runs[0]["context"]["team"] == "infra"
    assert {m["name"]: m["value"] for m in runs[1]["metrics"]}["power_avg_w"] == 65.0
    assert not (tmp_path / "home").exists()  # settings never loaded: no embedded PostgreSQL


def test_it_exits_2_naming_each_failed_file(fixtures: Path, tmp_path: Path):
    broken = tmp_path / "result.json"
    broken.write_text('{"model_id": "x", "request_throughput": 1.0,\n "mean_ttft_ms": ')
    unknown = tmp_path / "notes.txt"
    unknown.write_text("nothing to see\n")
    result = _parse(str(fixtures / "codecarbon_v1.csv"), str(broken), str(unknown), home=tmp_path / "home")
    assert result.returncode == 2
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2
    assert f"{broken}:2:" in errors[0]
    assert "notes.txt: unrecognised format (tried: mlperf-inference" in errors[1]
    assert [r["source_format"] for r in json.loads(result.stdout)] == ["codecarbon"]


def test_it_exits_2_on_bad_options(fixtures: Path, tmp_path: Path):
    assert _parse(str(fixtures / "vllm_2024.json"), "--context", "nonsense", home=tmp_path).returncode == 2
    assert _parse(str(fixtures / "vllm_2024.json"), "--format", "nope", home=tmp_path).returncode == 2
    forced = _parse(str(fixtures / "vllm_2024.json"), "--format", "codecarbon", home=tmp_path)
    assert forced.returncode == 2 and "vllm_2024.json" in forced.stderr


def test_it_reads_files_as_the_format_asked_for(tmp_path: Path):
    # no TTFT key: detection does not place it, --format does
    bare = tmp_path / "bare.json"
    bare.write_text('{"model_id": "org/Model-7B", "request_throughput": 3.0}')
    assert _parse(str(bare), home=tmp_path / "home").returncode == 2
    forced = _parse(str(bare), "--format", "vllm-serving", "--compact", home=tmp_path / "home")
    assert forced.returncode == 0, forced.stderr
    (run,) = json.loads(forced.stdout)
    assert run["source_format"] == "vllm-serving" and run["metrics"][0]["value"] == 3.0


def test_a_folder_reports_every_bad_file_not_only_the_first(fixtures: Path, tmp_path: Path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "a_vllm.json").write_text((fixtures / "vllm_2025.json").read_text())
    (folder / "b_result.json").write_text('{"model_id": "x", "request_throughput": 1.0,\n "mean_ttft_ms": ')
    (folder / "c_emissions.csv").write_text((fixtures / "codecarbon_v3.csv").read_text())
    (folder / "d_emissions.csv").write_text((fixtures / "codecarbon_v3.csv").read_text()[:-200])
    (folder / "notes.md").write_text("not a result: ignored in a folder\n")
    result = _parse(str(folder), home=tmp_path / "home")
    assert result.returncode == 2
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2, errors
    assert "b_result.json:2:" in errors[0] and "d_emissions.csv" in errors[1]
    assert sorted(r["source_format"] for r in json.loads(result.stdout)) == ["codecarbon", "vllm-serving"]
