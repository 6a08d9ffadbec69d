"""Comparing periods like with like (``costs.periods``) and the finance charts that must add up
(``costs.charts``). Pure: no database."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from accelboard.costs import charts
from accelboard.costs.periods import month_comparison, span_label, trailing_comparison
from tests import numbers


def test_it_compares_a_month_so_far_with_the_same_days_of_the_month_before() -> None:
    # Today is 6 December: five complete days against November's first five.
    comparison = month_comparison(month=dt.date(2026, 12, 1), today=dt.date(2026, 12, 6))
    assert comparison is not None
    assert comparison.label == "Dec 1–5 vs Nov 1–5"
    assert (comparison.days_now, comparison.days_before) == (5, 5)
    # On the 1st no day of December is complete: nothing to compare (the finding's −98.2 % was
    # December's first hours against the whole of November).
    assert month_comparison(month=dt.date(2026, 12, 1), today=dt.date(2026, 12, 1)) is None


def test_it_compares_a_longer_month_per_day() -> None:
    comparison = month_comparison(month=dt.date(2026, 3, 1), today=dt.date(2026, 4, 15))
    assert comparison is not None and comparison.label == "Mar 1–31 vs Feb 1–28, per day"
    # 3,100 over 31 days against 2,800 over 28: 100 a day both times, no change.
    assert (
        comparison.change_pct(now=Decimal(3100), before=Decimal(2800), covered_now=31, covered_before=28)
        == 0.0
    )


def test_it_shows_no_change_unless_both_windows_are_equally_covered() -> None:
    comparison = month_comparison(month=dt.date(2026, 11, 1), today=dt.date(2026, 12, 1))
    assert comparison is not None and comparison.label == "Nov 1–30 vs Oct 1–30"
    assert (
        comparison.change_pct(now=Decimal(300), before=Decimal(100), covered_now=30, covered_before=1) is None
    )
    assert (
        comparison.change_pct(now=Decimal(300), before=Decimal(150), covered_now=30, covered_before=30)
        == 100.0
    )
    week = trailing_comparison(today=dt.date(2026, 12, 1), days=7)
    assert week.label == "Nov 24–30 vs Nov 17–23"
    assert span_label(dt.date(2026, 11, 28), dt.date(2026, 12, 5)) == "Nov 28–Dec 4"


def test_it_draws_a_treemap_whose_teams_are_the_sums_of_their_tiles() -> None:
    # Three tiles of 10.006 each: rounded on its own the team is 30.02, its tiles 30.03, and
    # Plotly draws nothing ("parent value = 30.02, children sum = 30.03").
    rows = [
        {"team": "Vision", "accelerator_type": kind, "spend": Decimal("10.006")} for kind in ("A", "B", "C")
    ]
    figure = charts.spend_treemap_figure(rows=rows, currency="USD")
    (trace,) = figure["data"]
    assert trace["values"][0] == sum(trace["values"][1:]) == 30.03
    assert numbers.figure_problems({"id": "t", **figure}, totals={"spend": 30.02}) == []


def test_it_charts_spend_per_day_that_adds_up_to_the_spend_card() -> None:
    days = [dt.date(2026, 11, d) for d in (1, 2)]
    rows = [
        {"day": days[0], "group": "A", "spend": Decimal("10.004")},
        {"day": days[0], "group": "B", "spend": Decimal("5.004")},
        {"day": days[1], "group": "A", "spend": Decimal("1.001")},
    ]
    figure = charts.spend_over_time_figure(rows=rows, by_label="team", currency="USD", days=days)
    assert figure["layout"]["meta"] == {"sums_to": "spend"}
    assert numbers.figure_problems({"id": "s", **figure}, totals={"spend": 16.01}) == []
