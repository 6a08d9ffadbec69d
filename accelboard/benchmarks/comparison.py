"""Side-by-side comparison of two runs or two sets of repeated runs: pure computation, no ORM.

For each metric present on either side:

1. Each side's value is the mean of its runs' values (one run: its value).
2. ``delta = B - A`` and ``change_pct = delta / |A| * 100`` (None when A is 0: no honest ratio).
3. The direction says which way is *better*: for "higher is better" a rise is, for "lower is
   better" a fall; an exact tie is *same*. ``verdict`` is that sign only; ``flagged`` says whether
   the change is real and large enough to colour.
4. Evidence: each side's observations are its runs' values when it has several runs (the run is
   the unit of repetition), else its one run's repeated ``samples``. With at least
   ``MIN_OBSERVATIONS`` per side, Welch's t test on the log of the values (positive metrics:
   the change is a ratio, and run-to-run noise is a percentage of the level) or on the values
   themselves gives a p-value and a ``1 - ALPHA`` interval of the % change (the ratio of
   geometric means minus 1). Unlike a rank test, whose smallest possible p-value with 3 vs 3 is
   0.1, it has power at 3-5 runs per side: a 12% drop under 1.5% noise gives p ~ 1e-4.
5. ``flagged``: the interval excludes 0 (p < ``ALPHA``) *and* the change is at least the
   minimum effect (the detector's 2% by default): a significant +0.06% is noise for people.
   ``too_few`` says plainly when there is no test (fewer than two observations a side) or when
   the interval is so wide that a change of the minimum effect could not be told apart; the
   row then says how large a change these runs could have shown.

Known limits: one run's repeated samples show within-run noise only, not run-to-run noise, so a
one-vs-one comparison on samples is optimistic; Welch's t assumes roughly normal (log) values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

MIN_OBSERVATIONS = 2
ALPHA = 0.01  # two-sided; the interval shown is the 99% one
DEFAULT_MIN_EFFECT = 0.02  # the detector's default: smaller changes are not worth colouring


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
    verdict: str = "missing"  # better, worse, same, missing (the sign of the change only)
    p_value: float | None = None
    observations_a: int = 0
    observations_b: int = 0
    test_note: str = ""
    notes: list[str] = field(default_factory=list)
    interval_pct: tuple[float, float] | None = None  # 99% interval of the % change
    method: str = ""  # "welch-log" | "welch"
    min_effect_pct: float = DEFAULT_MIN_EFFECT * 100
    too_few: bool = False

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    @property
    def flagged(self) -> bool:
        """Significant and at least the minimum effect: the only rows coloured better or worse."""
        if not self.significant or self.change_pct is None or self.interval_pct is None:
            return False
        # The interval (from the observations) must lie on the side of the change (from the
        # values): a run whose value disagrees with its own samples is not coloured.
        same_side = self.interval_pct[0] > 0 if self.change_pct > 0 else self.interval_pct[1] < 0
        return (
            abs(self.change_pct) >= self.min_effect_pct and same_side and self.verdict in ("better", "worse")
        )


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


def welch(a: Sequence[float], b: Sequence[float], *, log: bool) -> tuple[float, tuple[float, float]]:
    """Welch's t test of B against A: (two-sided p, ``1 - ALPHA`` interval of the % change)."""
    x = [math.log(v) for v in a] if log else list(a)
    y = [math.log(v) for v in b] if log else list(b)
    na, nb = len(x), len(y)
    ma, mb = sum(x) / na, sum(y) / nb
    va = sum((v - ma) ** 2 for v in x) / (na - 1)
    vb = sum((v - mb) ** 2 for v in y) / (nb - 1)
    se2 = va / na + vb / nb
    diff = mb - ma
    if se2 <= 0:
        # No spread on either side: the difference is exact (p 0) or there is none (p 1).
        p, half = (0.0 if diff else 1.0), 0.0
    else:
        df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1)) if va or vb else na + nb - 2
        se = math.sqrt(se2)
        from scipy import stats  # imported when first needed: ~1 s for every process that loads the URLs

        p = float(2 * stats.t.sf(abs(diff) / se, df))
        half = float(stats.t.isf(ALPHA / 2, df)) * se
    lo, hi = diff - half, diff + half
    if log:
        return p, ((math.exp(lo) - 1) * 100, (math.exp(hi) - 1) * 100)
    scale = abs(ma) or 1.0
    return p, (lo / scale * 100, hi / scale * 100)


def metrics_compare(
    *,
    side_a: Sequence[Observation],
    side_b: Sequence[Observation],
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> list[MetricComparison]:
    """Compare every metric of side A (the reference) with side B: metrics on both sides first,
    then those only on one, each group by name. See the module docstring."""
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
            min_effect_pct=min_effect * 100,
        )
        units = {r.unit for r in rows_a + rows_b}
        if len(units) > 1:
            # Units are normalised on input, so this only happens for uncatalogued metrics.
            row.notes.append(f"units differ ({', '.join(sorted(units))}): not compared")
        elif value_a is not None and value_b is not None:
            row.delta = value_b - value_a
            row.change_pct = row.delta / abs(value_a) * 100 if value_a != 0 else None
            row.verdict = verdict_for(direction=row.direction, delta=row.delta)
            _test(row, _observations(rows_a), _observations(rows_b))
        else:
            row.notes.append("only in " + ("A" if value_b is None else "B"))
        result.append(row)
    result.sort(key=lambda row: (row.delta is None, row.metric))
    return result


def _test(row: MetricComparison, obs_a: list[float], obs_b: list[float]) -> None:
    row.observations_a, row.observations_b = len(obs_a), len(obs_b)
    if len(obs_a) < MIN_OBSERVATIONS or len(obs_b) < MIN_OBSERVATIONS:
        row.too_few = True
        row.test_note = (
            f"needs ≥{MIN_OBSERVATIONS} runs (or one run's repeated samples) per side; "
            f"A has {len(obs_a)}, B has {len(obs_b)}"
        )
        return
    if len(set(obs_a) | set(obs_b)) == 1:
        row.p_value = 1.0
        row.interval_pct = (0.0, 0.0)
        row.test_note = "every observation is equal"
        return
    log = all(v > 0 for v in obs_a + obs_b)
    row.method = "welch-log" if log else "welch"
    row.p_value, row.interval_pct = welch(obs_a, obs_b, log=log)
    lo, hi = row.interval_pct
    if not row.significant and max(abs(lo), abs(hi)) > 2 * row.min_effect_pct:
        # The interval spans 0 and reaches past twice the minimum effect on a side: these runs
        # cannot tell a change of the size that matters from noise.
        row.too_few = True
        row.test_note = (
            f"anything from {lo:+.1f}% to {hi:+.1f}% fits these {len(obs_a)} vs {len(obs_b)} observations"
        )
    elif row.significant and not row.flagged:
        row.test_note = f"real but below the {row.min_effect_pct:g}% minimum effect"
