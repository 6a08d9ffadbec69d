"""The demo's canaries: fp8-v2 (30% slower) fails on latency, throughput per GPU and cost per
token while its agreement holds; fp8-v3 (harmless) passes."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from accelboard.canary import analysis
from accelboard.canary.models import CanaryCheck
from accelboard.canary.selectors import canary_evaluate
from accelboard.demo import canary as demo_canary
from accelboard.demo import generator

NOW = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)


@pytest.fixture
def empty_telemetry(transactional_db: None, settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")


def test_the_demo_canary_fails_for_the_right_metrics_and_the_harmless_one_passes(
    empty_telemetry: None, tmp_path: Path
) -> None:
    flags = ["--hosts=6", "--days-runs=14", "--days-telemetry=3", "--telemetry-interval=300"]
    flags += ["--serving-interval=600", f"--now={NOW.isoformat()}", f"--manifest={tmp_path / 'm.json'}"]
    call_command("demo_fleet", *flags, stdout=StringIO())
    config = generator.DemoConfig(
        now=NOW, hosts=6, days_runs=14, days_telemetry=3, telemetry_interval_s=300, serving_interval_s=600
    )
    end = datetime.fromtimestamp(config.telemetry_end, UTC)
    checks = {c.name: c for c in CanaryCheck.objects.all()}
    assert set(checks) == {name for name, *_ in demo_canary.CANARIES}

    bad = canary_evaluate(check=checks["llama8b-fp8-v2"], end=end)
    assert len(bad.baseline.times) == len(bad.canary.times) == 72 * 6  # 3 days of 10-minute intervals
    assert bad.verdict.verdict == analysis.FAIL
    by_key = {m.key: m for m in bad.verdict.metrics}
    for key in (
        "ttft_p50_ms",
        "tpot_p50_ms",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "tokens_per_s_per_gpu",
        "cost_per_1m_tokens",
    ):
        assert by_key[key].verdict == analysis.FAIL, key
        assert by_key[key].worse_by == pytest.approx(0.3 if key.endswith("_ms") else 0.23, abs=0.05), key
    assert by_key["error_rate"].verdict == analysis.PASS
    assert by_key["agreement_rate"].verdict == analysis.PASS  # accuracy agreement holds
    assert by_key["agreement_rate"].n_canary >= 3

    good = canary_evaluate(check=checks["llama8b-fp8-v3"], end=end)
    assert good.verdict.verdict == analysis.PASS, [
        (m.key, m.verdict, m.worse_by) for m in good.verdict.metrics
    ]
