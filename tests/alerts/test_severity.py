"""The severity rule: effect size against the threshold, and what the metric means to users."""

from __future__ import annotations

import pytest

from accelboard.alerts import severity
from accelboard.alerts.severity import MetricEffect, metric_role, severity_for, worst


@pytest.mark.parametrize(
    ("metric", "role"),
    [
        ("latency_p99_ms", "user-facing"),
        ("ttft_p50_ms", "user-facing"),
        ("throughput_tokens_per_s", "user-facing"),
        ("accuracy", "user-facing"),
        ("accuracy_rouge1", "user-facing"),
        ("time_to_train_s", "user-facing"),
        ("power_avg_w", "secondary"),
        ("energy_per_token_j", "secondary"),
        ("memory_peak_bytes", "secondary"),
        ("temperature_c", "secondary"),
        ("utilization_pct", "secondary"),
        ("something_new", "user-facing"),
    ],
)
def test_it_knows_what_each_metric_means_to_users(metric: str, role: str) -> None:
    assert metric_role(metric) == role


@pytest.mark.parametrize(
    ("metric", "pct", "expected"),
    [
        # User-facing: Critical from 5x the 2% threshold (10%), Warning below.
        ("latency_p99_ms", 20.0, "critical"),
        ("throughput_tokens_per_s", -12.0, "critical"),
        ("throughput_tokens_per_s", -10.0, "critical"),
        ("throughput_tokens_per_s", -9.9, "warning"),
        ("latency_p50_ms", 3.0, "warning"),
        # Secondary: one step lower ("Average power +14.7%" is a Warning, not Critical).
        ("power_avg_w", 14.7, "warning"),
        ("energy_per_inference_j", 15.0, "warning"),
        ("power_avg_w", 4.0, "info"),
        ("memory_peak_bytes", 25.0, "warning"),
    ],
)
def test_a_regression_ranks_by_effect_and_meaning(metric: str, pct: float, expected: str) -> None:
    assert severity_for(regression=True, metric=metric, pct_change=pct, min_effect=0.02) == expected


def test_the_effect_is_measured_against_the_threshold_in_force() -> None:
    # 12% is a large change against 2%, a modest one against a noisy series' 5%.
    assert (
        severity_for(regression=True, metric="latency_p99_ms", pct_change=12.0, min_effect=0.02) == "critical"
    )
    assert (
        severity_for(regression=True, metric="latency_p99_ms", pct_change=12.0, min_effect=0.05) == "warning"
    )
    assert severity.effect_multiple(pct_change=-12.0, min_effect=0.02) == pytest.approx(6.0)
    assert severity.effect_multiple(pct_change=None, min_effect=0.02) is None
    # Unknown effect: never Critical on a guess.
    assert (
        severity_for(regression=True, metric="latency_p99_ms", pct_change=None, min_effect=0.02) == "warning"
    )


def test_an_improvement_is_info_whatever_its_size() -> None:
    assert (
        severity_for(regression=False, metric="latency_p99_ms", pct_change=-40.0, min_effect=0.02) == "info"
    )


def test_the_headline_is_the_worst_metric_then_the_user_facing_then_the_largest() -> None:
    power = MetricEffect(key=1, metric="power_avg_w", severity="warning", pct_change=15.0, min_effect=0.02)
    energy = MetricEffect(
        key=2, metric="energy_per_inference_j", severity="warning", pct_change=15.2, min_effect=0.02
    )
    p50 = MetricEffect(key=3, metric="latency_p50_ms", severity="warning", pct_change=4.0, min_effect=0.02)
    p99 = MetricEffect(key=4, metric="latency_p99_ms", severity="critical", pct_change=21.0, min_effect=0.02)
    assert worst([power, energy]) == energy
    assert worst([power, energy, p50]) == p50
    assert worst([power, p50, p99, energy]) == p99
    assert worst([]) is None


def test_the_definition_states_the_rule_it_applies() -> None:
    text = severity.SEVERITY_DEFINITION
    assert f"{severity.CRITICAL_MULTIPLE:g}×" in text
    assert "user-facing" in text and "secondary" in text and "Improvements are Info" in text
