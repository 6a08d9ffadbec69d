"""Quantization drift arithmetic: pure functions on plain data, no ORM, deterministic.

Why pure: the same arithmetic answers the model page, the overview, the Celery check and the
demo's replay, and is tested with hand-worked numbers.

1. **Pairing** (``drift_pairs``). Each accuracy result of a variant is paired with the reference
   variant's result on the same task and metric that is *nearest in time* (a tie goes to the
   earlier one: a result cannot have been compared with one that did not exist yet), optionally
   no further apart than ``max_gap``. A result with no reference in reach is left out, not
   guessed.
2. **Drift** = variant − reference (in the metric's unit); **ratio** = variant / reference
   (MLPerf's convention: a ``-99`` model keeps ratio ≥ 0.99 of the reference accuracy);
   **loss** = the relative accuracy given up, positive when the variant is worse, whichever way
   the metric points: (ref − value) / |ref| for higher-is-better, (value − ref) / |ref| for
   lower-is-better (perplexity). A budget is a maximum loss (0.01 = 1% relative).
3. **Days**: pairs are first reduced to one loss per UTC day (the median of that day's pairs), so
   a variant evaluated nightly on several machines weighs as much as one evaluated on one.
   **Level**: the median of the last ``LEVEL_POINTS`` days' losses, so that one noisy evaluation
   neither opens nor closes an over-budget verdict. Every "now" figure of a variant (its
   accuracy Δ, its ratio to the reference: ``level_ratio``) is this level written another way,
   never the newest single pair beside it (which read "Δ −5.19%" beside "ratio 0.9473").
4. **Trend** (``drift_trend``): least-squares slope of loss per day over the last
   ``TREND_POINTS`` days, its standard error and t statistic. The trend is *significant* when
   t ≥ ``TREND_T_MIN`` (one-sided p ≈ 1e-4 at 19 degrees of freedom) and the slope makes the
   loss grow; then the fitted level is projected forward to find the days until the budget.
   Why three weeks and t ≥ 5: the check runs every night on overlapping windows, so two weeks at
   t ≥ 4 (p ≈ 1e-3 a check) warned on 18 of 100 steady variants within a year in
   ``bench/drift.py``; three weeks at t ≥ 5 on 1 of 100, and still warned of the demo's
   0.05%/day slide 12-14 days before it crossed its budget (two weeks at t ≥ 6: 3-7 days).
5. **Verdict** (``budget_verdict``): ``over`` when the level exceeds the budget; ``trending``
   when a significant trend reaches the budget within ``HORIZON_DAYS``; ``within`` otherwise;
   ``no-data`` without a single pair.
6. **Risk** (``risk_score``): the loss expected ``RISK_DAYS`` from now as a multiple of the
   budget (level plus a significant slope times the days); sorts the overview.
7. **Pareto frontier** (``pareto_frontier``): of points (gain, loss), those no other point beats
   on both (more gain for no more loss, or less loss for no less gain).

Known limits: a trend is a straight line; a step (a new calibration set) shows as a steep slope
until the window has passed it, and the regression detector's change points (``segment``) are
drawn on the chart to tell the two apart. Accuracy results are assumed independent between runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

LEVEL_POINTS = 3
TREND_POINTS = 21
TREND_MIN_POINTS = 6
TREND_T_MIN = 5.0
HORIZON_DAYS = 30.0
RISK_DAYS = 14.0
DEFAULT_BUDGET = 0.01

OVER = "over"
TRENDING = "trending"
WITHIN = "within"
NO_DATA = "no-data"
VERDICT_ORDER = {OVER: 0, TRENDING: 1, WITHIN: 2, NO_DATA: 3}


@dataclass(frozen=True)
class Result:
    """One accuracy result: when it was measured, its value, and which run it came from."""

    at: datetime
    value: float
    run_id: int | None = None


@dataclass(frozen=True)
class DriftPair:
    at: datetime
    value: float
    reference_value: float
    reference_at: datetime
    drift: float
    ratio: float | None
    loss: float
    run_id: int | None = None


@dataclass(frozen=True)
class Trend:
    slope_per_day: float  # loss per day (positive: the variant is getting worse)
    stderr: float
    t: float
    points: int
    fitted_level: float  # the line's loss at the newest pair
    significant: bool
    days_to_budget: float | None  # None: not heading for the budget (or no significant trend)


def relative_loss(*, value: float, reference: float, direction: str) -> float:
    """Accuracy given up relative to the reference; positive = the variant is worse."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    if reference == 0:
        return 0.0 if value == reference else math.inf
    given_up = reference - value if direction == "higher" else value - reference
    return given_up / abs(reference)


def drift_pairs(
    variant: Sequence[Result],
    reference: Sequence[Result],
    *,
    direction: str = "higher",
    max_gap: timedelta | None = None,
) -> list[DriftPair]:
    """Pair each variant result with the nearest-in-time reference result (see 1.-2.)."""
    refs = sorted(reference, key=lambda r: r.at)
    out: list[DriftPair] = []
    if not refs:
        return out
    j = 0
    for result in sorted(variant, key=lambda r: r.at):
        # Advance j to the last reference at or before the result.
        while j + 1 < len(refs) and refs[j + 1].at <= result.at:
            j += 1
        candidates = [refs[j]]
        if j + 1 < len(refs):
            candidates.append(refs[j + 1])
        # min() keeps the first of equal gaps, and candidates are in time order: ties go earlier.
        nearest = min(candidates, key=lambda r: abs((r.at - result.at).total_seconds()))
        if max_gap is not None and abs(nearest.at - result.at) > max_gap:
            continue
        out.append(
            DriftPair(
                at=result.at,
                value=result.value,
                reference_value=nearest.value,
                reference_at=nearest.at,
                drift=result.value - nearest.value,
                ratio=result.value / nearest.value if nearest.value else None,
                loss=relative_loss(value=result.value, reference=nearest.value, direction=direction),
                run_id=result.run_id,
            )
        )
    return out


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class DailyLoss:
    """The median loss of one UTC day's pairs (a variant run nightly on several machines gives
    several results a day; the level and the trend weigh days, not machines)."""

    day: date
    loss: float
    count: int


def daily_losses(pairs: Sequence[DriftPair]) -> list[DailyLoss]:
    by_day: dict[date, list[float]] = {}
    for pair in pairs:
        by_day.setdefault(pair.at.astimezone(UTC).date(), []).append(pair.loss)
    return [DailyLoss(day=d, loss=_median(losses), count=len(losses)) for d, losses in sorted(by_day.items())]


def drift_level(pairs: Sequence[DriftPair], *, points: int = LEVEL_POINTS) -> float | None:
    """The current loss: median of the newest ``points`` days' losses (None without pairs)."""
    if not pairs:
        return None
    return _median([d.loss for d in daily_losses(pairs)[-points:]])


def over_budget_since(
    pairs: Sequence[DriftPair], *, budget: float, points: int = LEVEL_POINTS
) -> datetime | None:
    """When the level (3.) went over the budget and stayed there to the newest day: the newest
    evaluation of the first day of that stretch. None when the level is within the budget now.

    A drift alert is opened at this time, not when a check first looked: a variant that has been
    over its budget for six weeks was not "opened today" (the check's own time is kept apart)."""
    days = daily_losses(pairs)
    if not days:
        return None
    levels = [_median([d.loss for d in days[max(0, i - points + 1) : i + 1]]) for i in range(len(days))]
    if not levels[-1] > budget:
        return None
    first = len(days) - 1
    while first > 0 and levels[first - 1] > budget:
        first -= 1
    day = days[first].day
    return max(p.at for p in pairs if p.at.astimezone(UTC).date() == day)


def level_ratio(*, level: float | None, direction: str) -> float | None:
    """The ratio to the reference (variant / reference) that the level is: 1 − loss for a
    higher-is-better metric, 1 + loss for a lower-is-better one (the same days, the same median:
    a median commutes with this monotone map). None without a level."""
    if level is None or not math.isfinite(level):
        return None
    return 1.0 - level if direction == "higher" else 1.0 + level


LEVEL_DEFINITION = (
    f"Median of the newest {LEVEL_POINTS} days' evaluations, each against the nearest reference "
    "evaluation in time (one day: the median of its evaluations)"
)


def drift_trend(
    pairs: Sequence[DriftPair],
    *,
    budget: float,
    points: int = TREND_POINTS,
    min_points: int = TREND_MIN_POINTS,
    t_min: float = TREND_T_MIN,
) -> Trend | None:
    """Least-squares loss-per-day slope of the newest ``points`` days; None with too few."""
    window = daily_losses(pairs)[-points:]
    n = len(window)
    if n < min_points:
        return None
    d0 = window[0].day
    x = [float((d.day - d0).days) for d in window]
    y = [d.loss for d in window]
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((xi - mx) ** 2 for xi in x)
    if sxx <= 0:
        return None
    slope = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y, strict=True)) / sxx
    intercept = my - slope * mx
    residuals = [yi - (intercept + slope * xi) for xi, yi in zip(x, y, strict=True)]
    variance = sum(r * r for r in residuals) / (n - 2)
    stderr = math.sqrt(variance / sxx)
    # A perfect line (no residual) is infinitely sure of its sign.
    t = slope / stderr if stderr > 0 else math.copysign(math.inf, slope) if slope else 0.0
    fitted = intercept + slope * x[-1]
    significant = slope > 0 and t >= t_min
    days = None
    if significant:
        days = max(0.0, (budget - fitted) / slope)
    return Trend(
        slope_per_day=slope,
        stderr=stderr,
        t=t,
        points=n,
        fitted_level=fitted,
        significant=significant,
        days_to_budget=days,
    )


def budget_verdict(
    *, level: float | None, budget: float, trend: Trend | None, horizon_days: float = HORIZON_DAYS
) -> str:
    """over / trending / within / no-data (see 5.)."""
    if level is None:
        return NO_DATA
    if level > budget:
        return OVER
    if trend is not None and trend.days_to_budget is not None and trend.days_to_budget <= horizon_days:
        return TRENDING
    return WITHIN


def risk_score(*, level: float | None, budget: float, trend: Trend | None, days: float = RISK_DAYS) -> float:
    """Loss expected ``days`` ahead, in budgets (1.0 = exactly at the budget); -1 without data."""
    if level is None:
        return -1.0
    ahead = level
    if trend is not None and trend.significant:
        ahead = max(level, trend.fitted_level + trend.slope_per_day * days)
    return ahead / budget if budget > 0 else math.inf


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated (gain, loss) points, ordered by loss then gain.

    A point is dominated when another has at least its gain and at most its loss, and is better
    in one of the two. Equal points are all kept (none beats the other)."""
    order = sorted(range(len(points)), key=lambda i: (points[i][1], -points[i][0]))
    frontier: list[int] = []
    best_gain = -math.inf
    best_loss = math.nan
    for i in order:
        gain, loss = points[i]
        if gain > best_gain:
            frontier.append(i)
            best_gain, best_loss = gain, loss
        elif gain == best_gain and loss == best_loss:
            frontier.append(i)
    return frontier


def ratio_change(*, value: float | None, reference: float | None) -> float | None:
    """value / reference (speedup for throughput); None when either is missing or zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def saving(*, value: float | None, reference: float | None) -> float | None:
    """Fraction saved against the reference (memory, cost, energy): 1 − value / reference."""
    ratio = ratio_change(value=value, reference=reference)
    return None if ratio is None else 1.0 - ratio


def accuracy_task(metric_name: str) -> tuple[str, str]:
    """``accuracy:<task>:<metric>`` -> (task, metric); a bare ``accuracy`` -> ("accuracy", "score")."""
    parts = metric_name.split(":", 2)
    if len(parts) == 3 and parts[0] == "accuracy" and parts[1]:
        return parts[1], parts[2] or "score"
    if len(parts) == 2 and parts[0] == "accuracy" and parts[1]:
        return parts[1], "score"
    return "accuracy", "score"


BASELINE_DAYS = 7
AGREEMENT_BUDGET = 0.01


def agreement_pairs(
    days: Sequence[tuple[datetime, float]], *, baseline_days: int = BASELINE_DAYS
) -> list[DriftPair]:
    """Production agreement against its own start: each day's rate paired with the median rate of
    the first ``baseline_days`` days, so the drift arithmetic above (level, trend, verdict) reads
    a falling agreement as a growing loss. Empty until there are more days than the baseline."""
    ordered = sorted(days)
    if len(ordered) <= baseline_days:
        return []
    baseline = _median([rate for _, rate in ordered[:baseline_days]])
    first_day = ordered[0][0]
    return [
        DriftPair(
            at=at,
            value=rate,
            reference_value=baseline,
            reference_at=first_day,
            drift=rate - baseline,
            ratio=rate / baseline if baseline else None,
            loss=relative_loss(value=rate, reference=baseline, direction="higher"),
        )
        for at, rate in ordered
    ]
