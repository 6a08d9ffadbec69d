"""The demo's canaries: fp8-v2 (30% slower) fails on latency, throughput per GPU and cost per
token while its agreement holds; fp8-v3 (harmless) passes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum

from accelboard.canary import analysis
from accelboard.canary.models import CanaryCheck
from accelboard.canary.selectors import canary_evaluate
from accelboard.costs.models import ServingCostDaily
from accelboard.demo import canary as demo_canary
from accelboard.demo import generator
from accelboard.serving.models import InferenceMetric

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

    # Each canary replaced one stable replica: no GPU is named by two deployments in one interval
    # (anywhere in the demo's serving data), so a GPU's energy and GPU-hours count once.
    holders: dict[str, list[tuple[int, int, str]]] = {}
    for hostname, variant, labels, start, seconds, uuids in InferenceMetric.objects.values_list(
        "host__hostname", "variant__name", "labels", "interval_start", "interval_s", "accelerator_uuids"
    ):
        begin = int(start.timestamp())
        for uuid in uuids:
            holders.setdefault(uuid, []).append((begin, begin + seconds, f"{hostname} {variant} {labels}"))
    for uuid, spans in holders.items():
        spans.sort()
        for (_, first_end, first), (second_start, _, second) in itertools.pairwise(spans):
            assert first_end <= second_start, (uuid, first, second)
    # In the window the stable rows name the GPUs the canaries left, and carry the remaining half of
    # the traffic: per GPU, the stable deployment serves as much as the harmless canary.
    stable = list(
        InferenceMetric.objects.filter(labels={"track": "stable"}).values_list(
            "accelerator_uuids", "requests", "generated_tokens"
        )
    )
    canary_gpus = {
        uuid for uuids in InferenceMetric.objects.filter(variant__name__in=["fp8-v2", "fp8-v3"])
        .values_list("accelerator_uuids", flat=True) for uuid in uuids
    }  # fmt: skip
    assert len(stable) == 72 * 6 and len(canary_gpus) == 2
    assert all(len(uuids) == 2 and not canary_gpus & set(uuids) for uuids, _, _ in stable)
    v3 = InferenceMetric.objects.filter(variant__name="fp8-v3").aggregate(r=Sum("requests"))["r"]
    assert sum(r for _, r, _ in stable) / 2 == pytest.approx(v3, rel=0.01)
    # The window's serving costs were computed again: the canaries have theirs.
    assert ServingCostDaily.objects.filter(variant__name="fp8-v2", gpu_hours__gt=0).exists()
