"""Side-by-side comparison of two runs or two sets of repeated runs: pure computation, no ORM.

For each metric present on either side:

1. Each side's value is the mean of its runs' values (one run: its value).
2. ``delta = B - A`` and ``change_pct = delta / |A| * 100`` (None when A is 0: no honest ratio).
3. The verdict follows the metric's direction: for "higher is better" a rise is *better*, for
   "lower is better" a fall is; an exact tie is *same*.
4. Significance: each side's observations are its runs' values when it has several runs (the run
   is the unit of repetition), else its one run's repeated ``samples``. With at least
   ``MIN_OBSERVATIONS`` per side a two-sided Mann-Whitney U test gives a p-value; fewer, and the
   row says why there is none. Mann-Whitney assumes nothing about the distribution, which suits
   latency samples with long tails; with few observations its smallest p-value is large (3 vs 3
   cannot go below 0.1), so a lack of significance on a small set is not evidence of no change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy.stats import mannwhitneyu

MIN_OBSERVATIONS = 2
# asv's threshold for "significant" on A/B samples (DESIGN.md, Regressions).
SIGNIFICANCE_P = 0.002


@dataclass(frozen=True)
class Observation:
    """One run's value of one metric, as the comparison needs it."""

    run_id: int
    metric: str
    value: float
    unit: str
    direction: str
    samples: tuple[float, ...] = ()


@dataclass
class MetricComparison:
    metric: str
    unit: str
    direction: str
    value_a: float | None
    value_b: float | None
    runs_a: int
    runs_b: int
    delta: float | None = None
    change_pct: float | None = None
    verdict: str = "missing"  # better, worse, same, missing
    p_value: float | None = None
    observations_a: int = 0
    observations_b: int = 0
    test_note: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE_P


def _observations(rows: Sequence[Observation]) -> list[float]:
    if len(rows) > 1:
        return [row.value for row in rows]
    if len(rows) == 1:
        return [float(s) for s in rows[0].samples if math.isfinite(float(s))]
    return []


def verdict_for(*, direction: str, delta: float) -> str:
    if delta == 0:
        return "same"
    improved = delta > 0 if direction == "higher" else delta < 0
    return "better" if improved else "worse"


def metrics_compare(
    *, side_a: Sequence[Observation], side_b: Sequence[Observation]
) -> list[MetricComparison]:
    """Compare every metric of side A (the reference) with side B: metrics on both sides first,
    then those only on one, each group by name."""
    names = sorted({row.metric for row in side_a} | {row.metric for row in side_b})
    result = []
    for name in names:
        rows_a = [row for row in side_a if row.metric == name]
        rows_b = [row for row in side_b if row.metric == name]
        first = (rows_a or rows_b)[0]
        value_a = sum(r.value for r in rows_a) / len(rows_a) if rows_a else None
        value_b = sum(r.value for r in rows_b) / len(rows_b) if rows_b else None
        row = MetricComparison(
            metric=name,
            unit=first.unit,
            direction=first.direction,
            value_a=value_a,
            value_b=value_b,
            runs_a=len(rows_a),
            runs_b=len(rows_b),
        )
        units = {r.unit for r in rows_a + rows_b}
        if len(units) > 1:
            # Units are normalised on input, so this only happens for uncatalogued metrics.
            row.notes.append(f"units differ ({', '.join(sorted(units))}): not compared")
        elif value_a is not None and value_b is not None:
            row.delta = value_b - value_a
            row.change_pct = row.delta / abs(value_a) * 100 if value_a != 0 else None
            row.verdict = verdict_for(direction=row.direction, delta=row.delta)
            obs_a, obs_b = _observations(rows_a), _observations(rows_b)
            row.observations_a, row.observations_b = len(obs_a), len(obs_b)
            if len(obs_a) >= MIN_OBSERVATIONS and len(obs_b) >= MIN_OBSERVATIONS:
                if len(set(obs_a) | set(obs_b)) == 1:
                    row.test_note = "every observation is equal"
                else:
                    row.p_value = float(mannwhitneyu(obs_a, obs_b, alternative="two-sided").pvalue)
            else:
                row.test_note = (
                    f"needs ≥{MIN_OBSERVATIONS} samples or runs per side "
                    f"(A has {len(obs_a)}, B has {len(obs_b)})"
                )
        else:
            row.notes.append("only in " + ("A" if value_b is None else "B"))
        result.append(row)
    result.sort(key=lambda row: (row.delta is None, row.metric))
    return result
