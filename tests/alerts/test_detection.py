"""The pure change detector: hand-made series with known steps, outliers, reverts and noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelboard.alerts.detection import (
    IMPROVEMENT,
    NONE,
    REGRESSION,
    check_latest,
    own_spread_after,
    segment,
)
from bench.detection_replay import replay


def _noise(n: int, *, seed: int, level: float = 100.0, pct: float = 1.0) -> np.ndarray:
    return level + level * pct / 100 * np.random.default_rng(seed).standard_normal(n)


def _step(n: int, at: int, size: float, *, seed: int, pct: float = 1.0) -> np.ndarray:
    x = _noise(n, seed=seed, pct=pct)
    x[at:] *= 1 + size
    return x


@pytest.mark.parametrize(
    ("direction", "size", "kind"),
    [
        ("higher", -0.10, REGRESSION),
        ("higher", 0.10, IMPROVEMENT),
        ("lower", 0.10, REGRESSION),
        ("lower", -0.10, IMPROVEMENT),
    ],
)
def test_it_flags_a_sustained_step_by_direction(direction: str, size: float, kind: str):
    x = _step(60, 50, size, seed=1)
    verdict = check_latest(x, direction=direction)
    assert verdict.kind == kind
    assert verdict.change_index == 50
    assert verdict.pct_change == pytest.approx(size * 100, abs=2)
    assert verdict.level_before == pytest.approx(100, abs=1)
    assert verdict.level_after == pytest.approx(100 * (1 + size), abs=1.5)
    assert verdict.confidence > 0.999
    assert verdict.results_after == 10


def test_it_needs_fewer_results_for_a_bigger_step():
    def results_needed(size: float) -> int:
        x = _step(100, 60, size, seed=2)
        for end in range(61, 101):
            if check_latest(x[:end], direction="higher").kind == REGRESSION:
                return end - 60
        raise AssertionError(f"a {size:.0%} step at 1% noise was never flagged")

    big, small = results_needed(-0.20), results_needed(-0.03)
    assert big == 2  # never one: a single result cannot be told from an outlier
    assert small > big


def test_it_ignores_a_lone_outlier_in_either_direction():
    for sign in (1, -1):
        x = _noise(80, seed=3)
        x[70] += sign * 10  # 10 sigma
        assert [check_latest(x[:end], direction="higher").kind for end in range(71, 81)] == [NONE] * 10
        # ... and as history it does not open a segment.
        assert segment(x) == []


def test_it_says_a_far_off_newest_result_awaits_confirmation():
    x = _noise(40, seed=4)
    x[-1] = 80
    verdict = check_latest(x, direction="higher")
    assert verdict.kind == NONE
    assert "second result" in verdict.reason


def test_it_ignores_a_two_point_excursion_that_reverts():
    x = _noise(60, seed=5)
    x[55:57] -= 15
    # Once the newest result is back at the baseline, nothing is flagged, whatever came before.
    for end in range(58, 61):
        assert check_latest(x[:end], direction="higher").kind == NONE
    assert check_latest(x[:56], direction="higher").kind == NONE  # one shifted result: wait


def test_it_finds_no_change_in_noise_only_series():
    for seed in range(10):
        x = _noise(300, seed=100 + seed, pct=3)
        assert replay(x, direction="higher") == []
        assert segment(x) == []


def test_it_is_deterministic():
    x = _step(400, 150, -0.05, seed=6, pct=2)
    x[[40, 220, 330]] += 12
    assert check_latest(x[:170], direction="lower") == check_latest(x[:170].copy(), direction="lower")
    assert segment(x) == segment(list(x))
    assert replay(x, direction="higher") == replay(x, direction="higher")


def test_it_restarts_from_the_given_baseline():
    x = _step(80, 40, -0.10, seed=7)
    assert check_latest(x, direction="higher").kind == REGRESSION
    # A person marked the change at 40 expected: the new level is the baseline now.
    assert check_latest(x, direction="higher", baseline=40).kind == NONE


def test_it_skips_missing_results_and_reports_positions_in_the_input():
    x = _step(60, 50, -0.10, seed=8)
    x[[10, 30, 52]] = np.nan
    verdict = check_latest(x, direction="higher")
    assert verdict.kind == REGRESSION
    assert verdict.change_index == 50
    [cp] = segment(_with_gaps(_step(200, 100, 0.10, seed=9)), direction="lower")
    assert (cp.index, cp.kind) == (100, REGRESSION)


def _with_gaps(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x[[5, 50, 99, 150]] = np.nan
    return x


def test_it_applies_the_minimum_effect():
    # 3% step at 0.2% noise: overwhelming evidence, but smaller than a 5% minimum effect.
    x = _step(60, 45, -0.03, seed=10, pct=0.2)
    assert check_latest(x, direction="higher").kind == REGRESSION
    assert check_latest(x, direction="higher", min_effect=0.05).kind == NONE
    assert len(segment(x)) == 1
    assert segment(x, min_effect=0.05) == []


def test_it_uses_within_run_samples_on_a_short_history():
    rng = np.random.default_rng(11)
    runs = [100 + rng.standard_normal(20) for _ in range(3)] + [90 + rng.standard_normal(20)]
    values = [float(np.median(r)) for r in runs]
    assert check_latest(values, direction="higher").kind == NONE  # three runs are no baseline
    verdict = check_latest(values, direction="higher", samples=runs)
    assert verdict.kind == REGRESSION
    assert verdict.change_index == 3
    assert verdict.confidence > 0.998
    # The same medians with samples that overlap completely: no evidence of a change.
    wide = [v + 30 * rng.standard_normal(20) for v in values]
    assert check_latest(values, direction="higher", samples=wide).kind == NONE


def test_it_lets_noisy_samples_outweigh_a_quiet_series():
    # Run medians that happen to sit tight (0.1%) while each run's samples spread 10%: the 3%
    # move is within what one run can show, so it is not a change.
    rng = np.random.default_rng(12)
    values = list(100 + 0.1 * rng.standard_normal(40)) + [97.0, 96.9, 97.1]
    assert check_latest(values, direction="higher").kind == REGRESSION
    samples = [list(v + 10 * rng.standard_normal(5)) for v in values]
    assert check_latest(values, direction="higher", samples=samples).kind == NONE


def test_it_segments_a_history_with_up_and_down_steps():
    x = _noise(400, seed=13, pct=2)
    x[100:] *= 0.9
    x[250:] *= 1.2
    cps = segment(x, direction="higher")
    assert [(cp.index, cp.kind) for cp in cps] == [(100, REGRESSION), (250, IMPROVEMENT)]
    first = cps[0]
    assert first.level_before == pytest.approx(100, abs=1)
    assert first.level_after == pytest.approx(90, abs=1)
    assert first.spread_before == pytest.approx(2, rel=0.3)
    assert first.pct_change == pytest.approx(-10, abs=1.5)
    assert first.confidence > 0.999


def test_it_rejects_a_bad_direction_and_misaligned_samples():
    with pytest.raises(ValueError, match="direction"):
        check_latest([1.0, 2.0], direction="up")
    with pytest.raises(ValueError, match="samples"):
        check_latest([1.0, 2.0, 3.0], direction="higher", samples=[[1.0]])


# --- real series: trends, autocorrelation, seasonality, short histories -----------------------


def _ar1(n: int, phi: float, *, seed: int, sigma: float = 3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = rng.standard_normal()
    for i in range(1, n):
        x[i] = phi * x[i - 1] + math.sqrt(1 - phi * phi) * rng.standard_normal()
    return 100.0 + sigma * x


def test_a_steady_trend_is_one_segment_not_a_staircase():
    rng = np.random.default_rng(21)
    x = 100 + 0.1 * np.arange(400) + 2 * rng.standard_normal(400)  # +40% over the series
    assert segment(x) == []
    # A step on top of the same trend is found, with the jump (not the trend) as its size.
    x[250:] -= 10
    [cp] = segment(x)
    assert abs(cp.index - 250) <= 2 and cp.kind == REGRESSION
    assert cp.level_after - cp.level_before == pytest.approx(-10, abs=2.5)


def test_an_exponential_curve_is_not_cut():
    rng = np.random.default_rng(22)
    x = 100 * 3 ** (np.arange(300) / 300) * (1 + 0.02 * rng.standard_normal(300))
    assert segment(x) == []


def test_autocorrelated_noise_neither_segments_nor_alerts():
    for seed in range(3):
        x = _ar1(400, 0.8, seed=seed)
        assert segment(x) == [], seed
        assert replay(x, direction="higher") == [], seed
    # A real step in the same noise is still found.
    x = _ar1(400, 0.8, seed=5)
    x[200:] -= 20
    assert [abs(cp.index - 200) <= 3 for cp in segment(x)] == [True]


def test_a_trending_baseline_is_extrapolated_by_the_incremental_check():
    rng = np.random.default_rng(23)
    x = 100 - 0.05 * np.arange(300) + 2 * rng.standard_normal(300)  # slowly getting worse
    assert [v for v in replay(x, direction="higher") if v.kind == REGRESSION] == []
    x[-6:] -= 12  # a step on top of the trend
    verdict = check_latest(x, direction="higher")
    assert verdict.kind == REGRESSION and "trend" in verdict.reason


def test_a_weekly_pattern_is_not_a_change():
    rng = np.random.default_rng(24)
    week = np.array([1.0, 1.0, 0.5, 0.5, 0.0, -3.0, -3.0])
    x = 100 + week[np.arange(350) % 7] + rng.standard_normal(350)
    assert segment(x) == []
    x[200:] += 8
    assert [abs(cp.index - 200) <= 2 for cp in segment(x)] == [True]


def test_a_short_series_keeps_a_clear_step_and_its_noise_stays_quiet():
    rng = np.random.default_rng(25)
    quiet = 100 + 2 * rng.standard_normal(24)
    assert segment(quiet) == []
    step = quiet.copy()
    step[12:] -= 15
    assert [cp.index for cp in segment(step)] == [12]


def test_it_gives_the_after_level_its_own_spread_once_three_results_show_one():
    # With two results after a change the detector used to copy the baseline's spread into the
    # after level's, and the alert read the same "± 62.4314" before and after.
    x = _step(100, 60, -0.20, seed=2, pct=1.0)
    two = check_latest(x[:62], direction="higher")
    assert two.kind == REGRESSION and two.results_after == 2
    assert two.spread_before == pytest.approx(1.0, rel=0.4)
    assert two.spread_after is None
    x[62:] = 80 + np.array([-4.0, 4.0, 0.0, 2.0, -2.0] * 8)[: len(x) - 62]  # after: spread ~4, not 1
    five = check_latest(x[:65], direction="higher")
    assert five.kind == REGRESSION and five.results_after == 5
    assert five.spread_after == pytest.approx(
        1.4826 * float(np.median(np.abs(x[60:65] - np.median(x[60:65]))))
    )
    assert five.spread_after != five.spread_before
    # An alert stored before (the baseline's spread kept for two results) reads as having none.
    assert own_spread_after(62.4314, 2) is None
    assert own_spread_after(4.1, 3) == 4.1 and own_spread_after(4.1, None) == 4.1


def _arrays(count: int, *, seed: int) -> list[np.ndarray]:
    """Short and long, normal and heavy-tailed, rounded (ties) and repeated values, every scale."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(1, 3000 if i % 50 == 0 else 200))
        x = rng.standard_t(2 + i % 5, n) * 10.0 ** int(rng.integers(-3, 6)) + int(rng.integers(-5, 5)) * 1000
        if i % 4 == 1:
            x = np.round(x, 1)
        if i % 4 == 3:
            x = np.repeat(x[: max(1, n // 3)], 3)[:n]
        out.append(x)
    return out


def test_its_fast_median_and_percentiles_equal_numpys_bit_for_bit():
    # The detector's statistics take them in place of np.median / np.percentile: any difference,
    # even in the last bit, could move a verdict at a threshold.
    from accelboard.alerts import segmentation

    for x in _arrays(3000, seed=11):
        assert segmentation.median(x) == float(np.median(x))
        if len(x) >= 2:
            assert segmentation.percentiles(x, (2.5, 97.5)) == [
                float(v) for v in np.percentile(x, [2.5, 97.5])
            ]
    assert math.isnan(segmentation.median(np.array([])))


def test_its_winsorized_variance_constant_is_the_normal_distributions():
    from scipy import stats

    from accelboard.alerts import segmentation

    w = 3.0
    expected = float((2 * stats.norm.cdf(w) - 1) - 2 * w * stats.norm.pdf(w) + w**2 * 2 * stats.norm.sf(w))
    constant = segmentation._WINSOR_VAR
    assert constant == expected
