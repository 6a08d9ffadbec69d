"""The canary arithmetic: the rank test against hand-worked values, the effect size, each
verdict, and generated traffic where the truth is known (A/A at the stated false-fail rate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelboard.canary import analysis as a


def test_it_matches_the_hand_worked_rank_test_without_ties() -> None:
    # Every canary value beats every baseline value: U = 9 of 9 pairs. mu = 4.5,
    # var = 3*3/12 * 7 = 5.25, z = (4.5 - 0.5) / sqrt(5.25) = 1.7457, p = 2 * sf(z) = 0.0809.
    test = a.mann_whitney([1, 2, 3], [4, 5, 6])
    assert test.u == 9
    assert test.z == pytest.approx(4 / math.sqrt(5.25))
    assert test.p_value == pytest.approx(0.08086, abs=1e-4)


def test_it_corrects_for_ties_as_worked_by_hand() -> None:
    # Ranks of 1,2,2,2,3,3,3,4: 1, 3,3,3, 6,6,6, 8; the canary's (2,3,3,4) sum to 23, U = 13.
    # Two ties of three: var = 16/12 * (9 - 48/56) = 10.857; z = (13 - 8 - 0.5) / 3.2950 = 1.3657.
    test = a.mann_whitney([1, 2, 2, 3], [2, 3, 3, 4])
    assert test.u == 13
    assert test.z == pytest.approx(4.5 / math.sqrt(16 / 12 * (9 - 48 / 56)))
    assert test.p_value == pytest.approx(0.1720, abs=1e-4)
    reference = stats.mannwhitneyu([2, 3, 3, 4], [1, 2, 2, 3], method="asymptotic")
    assert test.p_value == pytest.approx(reference.pvalue)


def test_it_finds_no_evidence_in_identical_constant_samples() -> None:
    test = a.mann_whitney([5, 5, 5], [5, 5, 5])
    assert (test.z, test.p_value) == (0.0, 1.0)


def test_it_takes_the_hodges_lehmann_shift_as_the_median_pairwise_difference() -> None:
    # Differences canary - baseline: 3,2,1 / 4,3,2 / 5,4,3 -> median 3.
    assert a.hodges_lehmann([1, 2, 3], [4, 5, 6]) == 3
    # Robust to one wild value, where the difference of means is not.
    assert a.hodges_lehmann([10, 10, 10, 10], [11, 11, 11, 1000]) == 1


SPECS = {s.key: s for s in a.METRICS}


def _lognormal(rng: np.random.Generator, median: float, n: int, sigma: float = 0.08) -> list[float]:
    return list(median * np.exp(rng.normal(0, sigma, n)))


def test_it_fails_a_latency_regression_larger_than_the_minimum_effect() -> None:
    rng = np.random.default_rng(1)
    result = a.metric_compare(SPECS["e2e_p50_ms"], _lognormal(rng, 800, 60), _lognormal(rng, 1000, 60))
    assert result.verdict == a.FAIL
    assert result.worse_by == pytest.approx(0.25, abs=0.04)  # 1000 / 800 - 1
    assert result.p_value is not None and result.p_value < 1e-6


def test_it_passes_a_latency_improvement_however_significant() -> None:
    rng = np.random.default_rng(2)
    result = a.metric_compare(SPECS["e2e_p50_ms"], _lognormal(rng, 1000, 60), _lognormal(rng, 700, 60))
    assert result.verdict == a.PASS
    assert result.worse_by is not None and result.worse_by < -0.25
    assert result.reason == "significantly better"


def test_it_calls_a_throughput_drop_worse_as_higher_is_better() -> None:
    rng = np.random.default_rng(3)
    result = a.metric_compare(
        SPECS["tokens_per_s_per_gpu"], _lognormal(rng, 2000, 60), _lognormal(rng, 1700, 60)
    )
    assert result.verdict == a.FAIL
    assert result.effect is not None and result.effect < 0 < (result.worse_by or 0)


def test_it_is_marginal_between_half_and_the_whole_minimum_effect() -> None:
    rng = np.random.default_rng(4)
    spec = a.MetricSpec("x", "x", "ms", a.LOWER, 0.10)
    result = a.metric_compare(spec, _lognormal(rng, 100, 400, 0.03), _lognormal(rng, 107, 400, 0.03))
    assert result.verdict == a.MARGINAL
    assert 0.05 <= (result.worse_by or 0) < 0.10


def test_it_passes_a_significant_change_below_half_the_minimum_effect() -> None:
    rng = np.random.default_rng(5)
    spec = a.MetricSpec("x", "x", "ms", a.LOWER, 0.10)
    result = a.metric_compare(spec, _lognormal(rng, 100, 400, 0.01), _lognormal(rng, 102, 400, 0.01))
    assert result.p_value is not None and result.p_value < 1e-6
    assert result.verdict == a.PASS


def test_it_judges_error_rate_on_an_absolute_effect() -> None:
    # 0.1% -> 2% errors: 1.9 points, over the 0.5-point minimum effect.
    rng = np.random.default_rng(6)
    base = list(rng.binomial(1000, 0.001, 60) / 1000)
    worse = list(rng.binomial(1000, 0.02, 60) / 1000)
    result = a.metric_compare(SPECS["error_rate"], base, worse)
    assert result.verdict == a.FAIL and not result.relative
    assert result.effect == pytest.approx(0.019, abs=0.004)


def test_it_says_too_little_data_below_the_minimum_count() -> None:
    result = a.metric_compare(SPECS["e2e_p50_ms"], [1.0] * 9, [2.0] * 30)
    assert result.verdict == a.NO_DATA
    assert "9 baseline and 30 canary values, 10 needed" in result.reason
    assert result.p_value is None


def test_it_drops_missing_and_non_finite_values_before_counting() -> None:
    result = a.metric_compare(SPECS["e2e_p50_ms"], [1.0] * 10 + [None, math.nan], [1.0] * 10)
    assert result.n_baseline == 10


def _traffic(
    rng: np.random.Generator, n: int, *, latency: float = 1.0, cost: float = 1.0
) -> dict[str, list[float]]:
    """One deployment's per-interval values, every metric; ``latency``/``cost`` scale the truth."""
    return {
        "ttft_p50_ms": _lognormal(rng, 120 * latency, n, 0.10),
        "ttft_p99_ms": _lognormal(rng, 400 * latency, n, 0.20),
        "tpot_p50_ms": _lognormal(rng, 20 * latency, n, 0.05),
        "tpot_p99_ms": _lognormal(rng, 45 * latency, n, 0.15),
        "e2e_p50_ms": _lognormal(rng, 3000 * latency, n, 0.08),
        "e2e_p99_ms": _lognormal(rng, 9000 * latency, n, 0.20),
        "error_rate": list(rng.binomial(2000, 0.002, n) / 2000),
        "tokens_per_s_per_gpu": _lognormal(rng, 2500 / latency, n, 0.06),
        "j_per_1m_tokens": _lognormal(rng, 2.5e5 * cost, n, 0.07),
        "cost_per_1m_tokens": _lognormal(rng, 0.45 * cost, n, 0.06),
        "agreement_rate": list(np.clip(rng.normal(0.985, 0.003, max(3, n // 24)), 0, 1)),
    }


def test_it_fails_a_latency_and_cost_regression_for_those_metrics_only() -> None:
    rng = np.random.default_rng(7)
    verdict = a.canary_verdict(_traffic(rng, 72), _traffic(rng, 72, latency=1.3, cost=1.3))
    assert verdict.verdict == a.FAIL
    failed = set(verdict.failed)
    assert {"ttft_p50_ms", "tpot_p50_ms", "e2e_p50_ms", "cost_per_1m_tokens", "j_per_1m_tokens"} <= failed
    assert "error_rate" not in failed and "agreement_rate" not in failed


def test_it_holds_the_overall_verdict_until_the_serving_metrics_have_enough_data() -> None:
    rng = np.random.default_rng(8)
    verdict = a.canary_verdict(_traffic(rng, 5), _traffic(rng, 5, latency=2.0))
    assert verdict.verdict == a.NO_DATA
    # Agreement, daily, does not hold it: 72 hourly intervals but two days of agreement pass.
    base, canary = _traffic(rng, 72), _traffic(rng, 72)
    base["agreement_rate"], canary["agreement_rate"] = [0.98, 0.99], [0.98, 0.985]
    verdict = a.canary_verdict(base, canary)
    agreement = next(m for m in verdict.metrics if m.key == "agreement_rate")
    assert agreement.verdict == a.NO_DATA and verdict.verdict != a.NO_DATA


def test_it_leaves_out_a_metric_neither_deployment_reports() -> None:
    rng = np.random.default_rng(9)
    base, canary = _traffic(rng, 30), _traffic(rng, 30)
    del base["j_per_1m_tokens"]
    canary["j_per_1m_tokens"] = [None] * 30  # type: ignore[list-item]  # no telemetry: all gaps
    verdict = a.canary_verdict(base, canary)  # type: ignore[arg-type]  # gaps are allowed
    assert "j_per_1m_tokens" not in {m.key for m in verdict.metrics}


def test_it_takes_the_teams_minimum_effect_over_the_default() -> None:
    rng = np.random.default_rng(10)
    base, canary = _lognormal(rng, 1000, 200, 0.02), _lognormal(rng, 1040, 200, 0.02)
    assert a.canary_verdict({"e2e_p50_ms": base}, {"e2e_p50_ms": canary}).verdict == a.PASS
    strict = a.canary_verdict({"e2e_p50_ms": base}, {"e2e_p50_ms": canary}, min_effects={"e2e_p50_ms": 0.03})
    assert strict.verdict == a.FAIL


RUNS = 300


def test_an_a_a_comparison_fails_no_more_often_than_the_stated_rate() -> None:
    """Identical deployments, 300 seeded windows of 72 intervals: the overall fail rate must stay
    within the stated bound (11 metrics x alpha/2 = 2.75% at alpha = 0.005)."""
    bound = a.false_fail_bound(metrics=len(a.METRICS))
    assert bound == pytest.approx(0.0275)
    rng = np.random.default_rng(2026)
    verdicts = [a.canary_verdict(_traffic(rng, 72), _traffic(rng, 72)).verdict for _ in range(RUNS)]
    fails = verdicts.count(a.FAIL)
    assert fails / RUNS <= bound
    assert a.NO_DATA not in verdicts
    # A meaningful share pass outright: the verdict is not merely "marginal" everywhere.
    assert verdicts.count(a.PASS) / RUNS >= 0.9


def test_a_real_regression_is_caught_in_nearly_every_window() -> None:
    rng = np.random.default_rng(2027)
    verdicts = [
        a.canary_verdict(_traffic(rng, 72), _traffic(rng, 72, latency=1.25, cost=1.25)).verdict
        for _ in range(100)
    ]
    assert verdicts.count(a.FAIL) >= 99
