"""Hand-worked drift, trend, verdict and Pareto examples for the pure drift arithmetic."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from accelboard.drift import computation as c

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def test_it_pairs_each_result_with_the_nearest_reference_in_time() -> None:
    reference = [c.Result(day(0), 0.80), c.Result(day(10), 0.82)]
    variant = [c.Result(day(2), 0.79, run_id=1), c.Result(day(7), 0.81, run_id=2)]
    pairs = c.drift_pairs(variant, reference)
    # Day 2 is nearest day 0 (0.80); day 7 nearest day 10 (0.82).
    assert [p.reference_value for p in pairs] == [0.80, 0.82]
    assert pairs[0].drift == pytest.approx(-0.01)
    assert pairs[0].ratio == pytest.approx(0.79 / 0.80)  # 0.9875: a -99 model would fail
    assert pairs[0].loss == pytest.approx(0.0125)
    assert pairs[1].drift == pytest.approx(-0.01)
    assert pairs[1].loss == pytest.approx(0.01 / 0.82)
    assert [p.run_id for p in pairs] == [1, 2]


def test_it_breaks_a_tie_toward_the_earlier_reference() -> None:
    reference = [c.Result(day(0), 0.70), c.Result(day(2), 0.90)]
    (pair,) = c.drift_pairs([c.Result(day(1), 0.69)], reference)
    assert pair.reference_value == 0.70
    assert pair.loss == pytest.approx(0.01 / 0.70)


def test_it_leaves_out_results_with_no_reference_within_the_gap() -> None:
    reference = [c.Result(day(0), 0.80)]
    pairs = c.drift_pairs(
        [c.Result(day(1), 0.79), c.Result(day(30), 0.70)], reference, max_gap=timedelta(days=7)
    )
    assert [p.at for p in pairs] == [day(1)]
    assert c.drift_pairs([c.Result(day(1), 0.79)], []) == []


def test_it_counts_a_higher_perplexity_as_a_loss_when_lower_is_better() -> None:
    (pair,) = c.drift_pairs([c.Result(day(0), 5.5)], [c.Result(day(0), 5.0)], direction="lower")
    assert pair.drift == pytest.approx(0.5)
    assert pair.loss == pytest.approx(0.10)
    assert pair.ratio == pytest.approx(1.1)
    # A better-than-reference variant has a negative loss.
    assert c.relative_loss(value=0.81, reference=0.80, direction="higher") == pytest.approx(-0.0125)
    with pytest.raises(ValueError, match="direction"):
        c.relative_loss(value=1, reference=1, direction="up")


def test_it_takes_the_level_as_the_median_of_the_last_three_pairs() -> None:
    reference = [c.Result(day(0), 1.0)]
    variant = [c.Result(day(i + 1), v) for i, v in enumerate([0.999, 0.98, 0.995, 0.996])]
    pairs = c.drift_pairs(variant, reference)
    # Losses 0.001, 0.02, 0.005, 0.004 -> last three 0.02, 0.005, 0.004 -> median 0.005: the
    # one bad evaluation does not make the level 2%.
    assert c.drift_level(pairs) == pytest.approx(0.005)
    assert c.drift_level([]) is None


def _pairs(losses: list[float]) -> list[c.DriftPair]:
    return [
        c.DriftPair(
            at=day(i), value=1 - x, reference_value=1.0, reference_at=day(i), drift=-x, ratio=1 - x, loss=x
        )
        for i, x in enumerate(losses)
    ]


def test_it_projects_a_straight_trend_to_the_budget() -> None:
    # Loss 0.2% growing 0.05 points a day for 10 days, with +/-0.01 point alternating noise.
    losses = [0.002 + 0.0005 * i + (0.0001 if i % 2 else -0.0001) for i in range(10)]
    trend = c.drift_trend(_pairs(losses), budget=0.01)
    assert trend is not None
    assert trend.slope_per_day == pytest.approx(0.0005, rel=0.05)
    assert trend.significant
    # Fitted level at day 9 is ~0.65%: (1% - 0.65%) / 0.05%/day ~= 7 days.
    assert trend.fitted_level == pytest.approx(0.0065, abs=0.0002)
    assert trend.days_to_budget == pytest.approx(7.0, abs=0.5)
    level = c.drift_level(_pairs(losses))
    assert c.budget_verdict(level=level, budget=0.01, trend=trend) == c.TRENDING
    # The same trend with a 30-day horizon but a 5% budget is ~87 days away: within.
    far = c.drift_trend(_pairs(losses), budget=0.05)
    assert c.budget_verdict(level=level, budget=0.05, trend=far) == c.WITHIN


def test_it_finds_no_significant_trend_in_flat_noise() -> None:
    losses = [0.004, 0.006, 0.005, 0.004, 0.006, 0.005, 0.004, 0.006]
    trend = c.drift_trend(_pairs(losses), budget=0.01)
    assert trend is not None
    assert not trend.significant
    assert trend.days_to_budget is None
    assert c.budget_verdict(level=0.005, budget=0.01, trend=trend) == c.WITHIN
    assert c.drift_trend(_pairs(losses[:5]), budget=0.01) is None  # too few points


def test_it_says_over_budget_when_the_level_exceeds_it() -> None:
    assert c.budget_verdict(level=0.0101, budget=0.01, trend=None) == c.OVER
    assert c.budget_verdict(level=0.01, budget=0.01, trend=None) == c.WITHIN  # at the budget is allowed
    assert c.budget_verdict(level=None, budget=0.01, trend=None) == c.NO_DATA


def test_it_scores_risk_as_budgets_ahead() -> None:
    assert c.risk_score(level=0.02, budget=0.01, trend=None) == pytest.approx(2.0)
    trend = c.Trend(
        slope_per_day=0.0005,
        stderr=0.00001,
        t=50,
        points=14,
        fitted_level=0.006,
        significant=True,
        days_to_budget=8,
    )
    # 0.6% + 14 days x 0.05% = 1.3% -> 1.3 budgets.
    assert c.risk_score(level=0.006, budget=0.01, trend=trend) == pytest.approx(1.3)
    assert c.risk_score(level=None, budget=0.01, trend=None) == -1.0


def test_it_draws_the_pareto_frontier_of_speedup_against_loss() -> None:
    # (speedup, loss): A 1.0x/0%, B 1.5x/0.5%, C 1.3x/0.8% (dominated by B), D 2.0x/2%,
    # E 1.9x/2.5% (dominated by D), F 1.5x/0.5% (equal to B: both kept).
    points = [(1.0, 0.0), (1.5, 0.005), (1.3, 0.008), (2.0, 0.02), (1.9, 0.025), (1.5, 0.005)]
    assert c.pareto_frontier(points) == [0, 1, 5, 3]
    assert c.pareto_frontier([]) == []
    # Less loss at the same gain dominates.
    assert c.pareto_frontier([(1.2, 0.01), (1.2, 0.005)]) == [1]


def test_it_computes_speedup_and_savings() -> None:
    assert c.ratio_change(value=7100, reference=4700) == pytest.approx(1.5106, rel=1e-4)
    assert c.saving(value=68, reference=71) == pytest.approx(3 / 71)
    assert c.saving(value=None, reference=71) is None
    assert c.ratio_change(value=1, reference=0) is None


def test_it_reads_the_task_from_the_metric_name() -> None:
    assert c.accuracy_task("accuracy:arc_easy:acc_norm") == ("arc_easy", "acc_norm")
    assert c.accuracy_task("accuracy:llama2-70b-99:rouge1") == ("llama2-70b-99", "rouge1")
    assert c.accuracy_task("accuracy") == ("accuracy", "score")
    assert math.isinf(c.relative_loss(value=1, reference=0, direction="higher"))


def test_it_reads_a_falling_production_agreement_as_a_growing_loss() -> None:
    # A week at 0.96, 0.97, 0.96, 0.96, 0.95, 0.96, 0.96 (median 0.96), then 0.955, 0.950, 0.945.
    rates = [0.96, 0.97, 0.96, 0.96, 0.95, 0.96, 0.96, 0.955, 0.950, 0.945]
    pairs = c.agreement_pairs([(day(i), r) for i, r in enumerate(rates)])
    assert len(pairs) == 10
    assert {p.reference_value for p in pairs} == {0.96}
    assert pairs[-1].loss == pytest.approx(0.015 / 0.96)
    # Newest three days' losses 0.5/96, 1/96, 1.5/96 -> level 1/96 = 1.04%: over a 1% budget.
    level = c.drift_level(pairs)
    assert level == pytest.approx(0.01 / 0.96)
    assert c.budget_verdict(level=level, budget=c.AGREEMENT_BUDGET, trend=None) == c.OVER
    assert c.agreement_pairs([(day(i), 0.9) for i in range(7)]) == []  # a baseline only


def test_the_ratio_now_is_the_level_written_as_variant_over_reference() -> None:
    assert c.level_ratio(level=0.0519, direction="higher") == pytest.approx(0.9481)
    assert c.level_ratio(level=0.02, direction="lower") == pytest.approx(1.02)  # perplexity up 2%
    assert c.level_ratio(level=None, direction="higher") is None


def test_it_finds_when_the_level_went_over_the_budget_and_stayed() -> None:
    t0 = datetime(2026, 3, 1, 12, tzinfo=UTC)

    def pairs(losses: list[float]) -> list[c.DriftPair]:
        return [
            c.DriftPair(
                at=t0 + timedelta(days=i),
                value=1 - loss,
                reference_value=1.0,
                reference_at=t0 + timedelta(days=i),
                drift=-loss,
                ratio=1 - loss,
                loss=loss,
            )
            for i, loss in enumerate(losses)
        ]

    # Over on days 1-2 (a blip: the median of three is over on days 2-3), back within on 4-5,
    # over again from day 5: the stretch that lasts to now starts when the median first is over.
    losses = [0.0, 0.02, 0.02, 0.0, 0.0, 0.03, 0.03, 0.03, 0.03]
    assert c.over_budget_since(pairs(losses), budget=0.01) == t0 + timedelta(days=6)
    assert c.over_budget_since(pairs([0.0, 0.005]), budget=0.01) is None
    assert c.over_budget_since([], budget=0.01) is None
