"""The one definition of a series' levels and baseline (``alerts.levels``): pure, no database."""

from __future__ import annotations

import numpy as np
import pytest

from accelboard.alerts import detection
from accelboard.alerts.levels import (
    SAME_CHANGE,
    baseline_resolve,
    boundaries_merge,
    change_levels,
    segments_of,
)


def _stepped(n_before: int = 30, n_after: int = 2, *, drop: float = 0.16, seed: int = 7) -> list[float]:
    """Throughput near 1000 (1% noise), then ``n_after`` results ``drop`` lower."""
    rng = np.random.default_rng(seed)
    before = 1000.0 * (1 + 0.01 * rng.standard_normal(n_before))
    after = 1000.0 * (1 - drop) * (1 + 0.01 * rng.standard_normal(n_after))
    return [float(v) for v in (*before, *after)]


def test_it_cuts_a_series_into_segments_at_their_medians() -> None:
    values = [1.0, 2.0, 3.0, 10.0, 11.0, float("nan"), 12.0]
    segments = segments_of(values, boundaries=[3])
    assert [(s.start, s.end, s.level) for s in segments] == [(0, 2, 2.0), (3, 6, 11.0)]
    assert segments[1].count == 4  # the NaN is inside the span, not in the level


def test_it_lets_an_alert_boundary_win_over_a_nearby_detector_change() -> None:
    assert boundaries_merge(n=40, changes=[12, 20 + SAME_CHANGE, 30], fixed=[20]) == [12, 20, 30]
    assert boundaries_merge(n=40, changes=[0, 40, 20 + SAME_CHANGE + 1], fixed=[20]) == [20, 24]


@pytest.mark.parametrize("regressed", [2, 3, 6, 12, 25])
def test_it_keeps_the_baseline_before_an_open_regression_however_many_results_follow(regressed: int) -> None:
    """The issue's case: after two (or twenty-five) regressed runs the baseline is still the level
    before the change, and the regressed level is the current level beside it."""
    values = _stepped(30, regressed)
    changes = [cp.index for cp in detection.segment(values, direction="higher")]
    view = baseline_resolve(values=values, changes=changes, holds=[30])
    assert view is not None and view.held_at == 30
    assert (view.baseline.start, view.baseline.end) == (0, 29)
    assert view.baseline.level == float(np.median(values[:30]))
    assert (view.current.start, view.current.end) == (30, 30 + regressed - 1)
    assert view.current.level == float(np.median(values[30:]))
    assert view.current_pct == pytest.approx(-16.0, abs=1.5)


def test_it_moves_the_baseline_once_the_change_is_accepted() -> None:
    values = _stepped(30, 12)
    changes = [cp.index for cp in detection.segment(values, direction="higher")]
    # No open alert (resolved, dismissed): the current segment is the baseline.
    free = baseline_resolve(values=values, changes=changes, ends=[30])
    assert free is not None and not free.held and free.baseline.start == 30
    # Marked expected: the baseline starts at the mark, even with the alert's row still open.
    accepted = baseline_resolve(values=values, changes=changes, resets=[30], holds=[30])
    assert accepted is not None and not accepted.held and accepted.baseline.start == 30


def test_it_holds_the_baseline_at_the_earliest_of_several_open_regressions() -> None:
    values = [100.0] * 20 + [90.0] * 10 + [80.0] * 10
    view = baseline_resolve(values=values, changes=[20, 30], holds=[30, 20])
    assert view is not None and view.held_at == 20
    assert (view.baseline.start, view.baseline.end, view.baseline.level) == (0, 19, 100.0)
    assert (view.current.start, view.current.level) == (30, 80.0)


def test_it_has_no_level_before_a_change_at_the_first_result() -> None:
    view = baseline_resolve(values=[5.0, 5.0, 6.0], holds=[0])
    assert view is not None and not view.held and view.baseline.level == 5.0
    assert baseline_resolve(values=[]) is None


def test_it_gives_the_levels_either_side_of_a_change_over_their_own_results() -> None:
    # Down at 20, back up at 30 (the revert): the after level ends where the values went back.
    values = [100.0] * 20 + [85.0] * 10 + [100.0] * 10
    before, after = change_levels(values=values, first=20, fixed=[30])
    assert before is not None and after is not None
    assert (before.start, before.end, before.level) == (0, 19, 100.0)
    assert (after.start, after.end, after.level) == (20, 29, 85.0)
    # An earlier change the detector found starts the before level there.
    before, _ = change_levels(values=[120.0] * 10 + values, first=30, changes=[10])
    assert before is not None and (before.start, before.end) == (10, 29)
    assert change_levels(values=values, first=0)[0] is None
