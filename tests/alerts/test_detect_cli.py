"""``accelboard detect`` through ``python -m accelboard.cli``: output shape, exit codes, no database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelboard.alerts.detect_cli import main

ROOT = Path(__file__).resolve().parents[2]


def _series() -> list[float]:
    x = 100 + np.random.default_rng(1).standard_normal(120)
    x[80:] += 12  # latency up 12%: worse when lower is better
    return [round(float(v), 3) for v in x]


def test_it_prints_change_points_as_json_without_a_database(tmp_path: Path):
    path = tmp_path / "latency.csv"
    path.write_text(
        "time,value\n"
        + "".join(f"2025-01-{i // 24 + 1:02d}T{i % 24:02d}:00,{v}\n" for i, v in enumerate(_series()))
    )
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env["ACCELBOARD_HOME"] = str(tmp_path / "home")  # where an embedded PostgreSQL would appear
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "accelboard.cli", "detect", str(path), "--metric", "latency_p99_ms"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["direction"] == "lower"  # from the metric catalogue
    assert out["points"] == 120
    [cp] = out["change_points"]
    assert cp["index"] == 80
    assert cp["time"] == "2025-01-04T08:00"
    assert cp["kind"] == "regression"
    assert cp["pct_change"] == pytest.approx(12, abs=1.5)
    assert set(cp) >= {"level_before", "level_after", "confidence"}
    assert out["latest"]["kind"] == "regression"  # the step is still within the newest results' window
    assert not (tmp_path / "home").exists()  # settings never loaded


def test_it_reads_plain_values_and_json_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    values = _series()
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(str(v) for v in values) + "\n")
    numbers = tmp_path / "numbers.json"
    numbers.write_text(json.dumps(values))
    objects = tmp_path / "objects.json"
    objects.write_text(json.dumps([{"time": i, "value": v} for i, v in enumerate(values)]))
    outputs = []
    for path in (plain, numbers, objects):
        assert main([str(path), "--direction", "higher", "--compact"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    for out in outputs:
        assert [(cp["index"], cp["kind"]) for cp in out["change_points"]] == [(80, "improvement")]
    assert "time" not in outputs[0]["change_points"][0]
    assert outputs[2]["change_points"][0]["time"] == "80"


def test_it_keeps_gaps_in_the_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    values: list[float | None] = list(_series())
    values[10] = values[90] = None
    path = tmp_path / "gaps.json"
    path.write_text(json.dumps(values))
    assert main([str(path), "--direction", "lower"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["points"] == 120
    assert [cp["index"] for cp in out["change_points"]] == [80]


def test_it_reports_no_change_on_a_flat_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "flat.csv"
    path.write_text(
        "value\n" + "\n".join(str(100 + 0.5 * v) for v in np.random.default_rng(2).standard_normal(200))
    )
    assert main([str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["change_points"] == []
    assert out["latest"]["kind"] == "none"
    assert out["direction"] == "higher"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.csv", "time,value\n1,100\n2,abc\n3,101\n", "bad.csv:3: 'abc' is not a number"),
        ("cols.csv", "1,100\n2,101,7\n", "cols.csv:2: expected 2 columns, got 3"),
        ("wide.csv", "a,b,c\n", "wide.csv:1: expected 'value' or 'time,value'"),
        ("inf.csv", "100\ninf\n", "inf.csv:2: 'inf' is not a finite number"),
        ("empty.csv", "value\n", "empty.csv: no values"),
        ("broken.json", '[1, 2,\n  "x" 3]', "broken.json:2: invalid JSON"),
        ("item.json", '[1, 2, "fast"]', "item.json: item 2: value 'fast' is not a number"),
        ("object.json", '[{"value": 1}, {"time": 2}]', "object.json: item 1: object without 'value'"),
        ("dict.json", '{"value": 1}', "dict.json: expected a JSON list"),
    ],
)
def test_it_exits_2_naming_the_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, message: str
):
    path = tmp_path / name
    path.write_text(content)
    assert main([str(path)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""  # nothing half-written


def test_it_exits_2_on_bad_options_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "ok.csv"
    path.write_text("1\n2\n3\n")
    assert main([str(path), "--metric", "no_such_metric"]) == 2
    assert "not in the catalogue" in capsys.readouterr().err
    assert main([str(path), "--direction", "sideways"]) == 2
    assert main([str(path), "--min-effect", "-1"]) == 2
    assert main([str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    # An unknown metric with an explicit direction is fine: the direction is all it needed.
    assert main([str(path), "--metric", "no_such_metric", "--direction", "lower"]) == 0
