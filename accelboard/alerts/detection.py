"""Change detection on one benchmark series: pure numpy/scipy, no ORM, deterministic.

A series is one metric of one workload on one hardware configuration, in run order. Two entry
points share the same noise model:

1. ``check_latest(values, direction=..., samples=..., min_effect=..., baseline=...)`` is the
   incremental check made when a new run arrives. It answers: do the newest results form a real,
   sustained shift against the series' current baseline?

   a. The baseline is the segment since the last accepted change point or expected-change mark
      (``baseline``, an index into ``values``). Each candidate window (below) is compared with
      the results just before it, at most ``max_baseline`` of them and at least
      ``min_baseline``; their statistics are computed at a few cut points (the smallest cut at
      or above the window's length) so a check costs a handful of medians. Missing points (NaN)
      are skipped; indices in the answer are positions in ``values``.
   b. Noise is estimated robustly per series: 1.4826 x the median absolute deviation (MAD) of
      the baseline, which equals the standard deviation for normal noise and ignores outliers;
      from 40 results on, the central 95% read as +/- 1.96 sigma when larger (heavy tails). The
      MAD has ~37% efficiency, so its Student t has 0.37 (n - 1) degrees of freedom: a short
      baseline needs much more evidence. Within-run repeated ``samples`` (the last 40 runs')
      give the standard error of one run's value: when the series spreads no more than twice
      that, the larger of the two figures is used with the samples' (many) degrees of freedom;
      otherwise the series' own spread, never less than the samples' figure.
   c. Candidate "after" windows are the last k results, k = 2 .. ``max_after``; a window passes
      when its shift is significant, the relative shift is at least ``min_effect``, and the
      newest result is itself past the midpoint between the two levels.
      - k = 2: both results must be off, so the statistic is the smaller of the two shifts,
        tested at ``alpha`` ** 0.6 (two independent tails, with room for a noisy sigma).
      - k = 3: the mean of the two results nearer the baseline (the most extreme is dropped).
      - k >= 4: the mean of the window winsorized at +/- 3 sigma around its own median (one
        wild value moves it by at most 3 sigma / k, a real step keeps its full height).
      For k >= 3 the shift is over the standard error of that mean and of the baseline median,
      at ``alpha``.
   d. Consequences: a single result never alerts (a lone outlier that reverts is an outlier);
      a revert of the newest result fails the midpoint rule, whatever came before; a step of
      3.3 sigma or more usually passes with k = 2-3, a small one needs roughly
      k >= (z / effect-in-sigmas)^2 results.
   e. The change index is located inside the longest passing window by the CUSUM argmax (the
      split maximising the mean-difference statistic), and the levels before/after, their
      spreads, % change and confidence (1 - p of the strongest window) are reported.
   f. Direction: ``"higher"`` means higher is better. A shift to the worse side is a
      ``regression``, to the better side an ``improvement``; both need the same evidence.
   g. Short history with samples: when the baseline has too few runs for a series noise estimate
      (under ``min_baseline``) but the newest run and earlier runs carry repeated samples, their
      samples are compared with a one-sided Mann-Whitney U test at ``alpha_samples`` (asv uses
      p < 0.002) and the mean shift must also pass a z test on the pooled within-run spread at
      ``alpha`` (ranks say "different", not "by how much"); then the newest run alone may be
      flagged.

   h. Real series (measured on the nuisance series of ``bench/detection.py``): the baseline's
      AR(1) coefficient (``segmentation.ar_phi``, from lag-1 and lag-2 differences) widens the
      standard error of a window mean (the exact AR(1) variance of a k-point mean) and of the
      baseline level, and moves the pair rule's exponent towards 1 (correlated results are one
      tail, not two). A baseline that trends (its slope, the median of differences between
      results half the baseline apart, at least ``baseline.TREND_T`` standard errors from 0, and a line
      fitting it better than one step does) is extrapolated to the window, with the
      extrapolation's variance. A wandering level (results a quarter of the baseline apart
      differing by clearly more than steady noise allows, after taking out the best single
      step) adds its random-walk variance over the distance between baseline and window.

2. ``segment(values, direction=..., min_effect=..., min_size=...)`` segments a whole history
   offline (trend charts, re-scoring after a threshold change, ``accelboard detect``): the
   penalised segmentation of ``segmentation.py`` (noise from differences, corrected for
   autocorrelation and a drifting level; significant weekly/monthly seasonality removed; a log
   scale for series whose noise grows with the level; each segment a level or a line; the exact
   optimum over binary-segmentation and seeded-interval candidates with a penalty growing with
   the series' length in units of the long-run noise), then the minimum effect on the jump at
   each change. Levels are reported at the change (a constant segment by its median, a line by
   its value there); confidence is 1 - p with p = 2 sf(z) x (places the split could go) for the
   jump's z, a Bonferroni bound: conservative, not calibrated.

Known limits:
- A single result cannot be told from an outlier, so without samples nothing is flagged before
  the second shifted result (the bench reports the latency this costs). A 10% step at 3% noise
  is 3.3 sigma, smaller than the 5-sigma lone outlier that must never alert: flagging it at its
  first result from run values is impossible without also flagging the outlier.
- At 3% noise a 3% step is one sigma: it takes about twenty results to tell it from noise at a
  false-alert rate of one per hundred 500-point series. Lowering ``alpha`` trades the two.
- Dependence beyond AR(1) is approximated by AR(1); a random-walk baseline that wanders by
  several noise widths over the baseline still reads as level shifts once they pass the minimum
  effect (about one false regression per series of 500 runs on the bench's walk). A change in
  variance alone is not reported.
- Heavy-tailed noise: the MAD ignores the tails, so bursts of large values are more likely to pass
  than under normal noise (the pair rule at k = 2 is the most exposed); the tail-based sigma, the
  newest-point rule and the winsorized window mean absorb most of it.
- Values near zero make relative effects meaningless: with a baseline level of exactly 0 the
  minimum effect is not applied.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from accelboard.core import numbers

from . import segmentation
from .baseline import MAD_EFFICIENCY, MAD_TO_SIGMA, Baseline, baseline_estimate, robust_sigma

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NONE = "none"
DIRECTIONS = ("higher", "lower")

DEFAULT_MIN_EFFECT = 0.02  # 2% relative: below it a shift is not worth a person's attention
DEFAULT_ALPHA = 1e-6  # per window; tuned with bench/detection.py for <= 1 false alert / 100 series
DEFAULT_ALPHA_SAMPLES = 0.002
DEFAULT_MAX_AFTER = 30
DEFAULT_MAX_BASELINE = 200
DEFAULT_MIN_BASELINE = 8
DEFAULT_MIN_SIZE = 5
PAIR_EXPONENT = 0.6  # the pair rule tests its smaller shift at alpha ** this (0.5: two independent
# tails; 0.6 leaves room for a noisy sigma, so a 5-sigma outlier plus an ordinary 3-sigma draw fails)
_SAMPLE_RUNS = 40  # runs whose repeats estimate the within-run spread
SPREAD_MIN_RESULTS = 3  # results a level needs before it has a spread of its own


@dataclass(frozen=True)
class Verdict:
    """The answer of ``check_latest``: what changed, where, by how much, how sure, and why."""

    kind: str  # regression | improvement | none
    change_index: int | None
    level_before: float | None
    spread_before: float | None
    level_after: float | None
    spread_after: float | None
    pct_change: float | None
    confidence: float
    results_after: int  # results in the shifted window (the evidence used)
    reason: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ChangePoint:
    """One change found by ``segment``: ``index`` is the first result of the new level."""

    index: int
    level_before: float
    spread_before: float
    level_after: float
    spread_after: float
    pct_change: float
    confidence: float
    kind: str  # regression | improvement

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")


def _kind(shift: float, direction: str) -> str:
    if shift == 0:
        return NONE
    worse = shift < 0 if direction == "higher" else shift > 0
    return REGRESSION if worse else IMPROVEMENT


def _pct(before: float, after: float) -> float:
    if before == 0:
        return math.inf if after > 0 else (-math.inf if after < 0 else 0.0)
    return (after - before) / abs(before) * 100.0


def _relative(before: float, shift: float) -> float:
    # A baseline of exactly 0 has no relative scale: the effect test is skipped (see Known limits).
    return math.inf if before == 0 else abs(shift) / abs(before)


def own_spread_after(spread_after: float | None, results_after: object) -> float | None:
    """The after level's spread as stored, or None when it rests on fewer than
    ``SPREAD_MIN_RESULTS`` results: alerts raised before their own spread was kept carry the
    baseline's there, which would read as the same spread before and after."""
    if isinstance(results_after, int | float) and results_after < SPREAD_MIN_RESULTS:
        return None
    return spread_after


def _finite(values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("values must be a flat sequence of numbers")
    keep = np.flatnonzero(np.isfinite(x))
    return keep, x[keep]


def _within_run_se(
    samples: Sequence[Sequence[float] | None], positions: np.ndarray
) -> tuple[float, float, float]:
    """Pooled robust spread of repeated samples within runs, the standard error of one run's value,
    and the degrees of freedom behind them."""
    residuals: list[np.ndarray] = []
    counts: list[int] = []
    for pos in positions:
        run = samples[int(pos)]
        if run is None:
            continue
        res = _run_residuals(tuple(run))
        if res is not None:
            residuals.append(res)
            counts.append(len(res))
    if not residuals:
        return 0.0, 0.0, 0.0
    pooled = np.concatenate(residuals)
    spread = float(MAD_TO_SIGMA * np.median(np.abs(pooled)))
    df = MAD_EFFICIENCY * float(sum(c - 1 for c in counts))
    return spread, spread / math.sqrt(float(np.median(counts))), df


@functools.lru_cache(maxsize=16384)
def _run_residuals(run: tuple[float, ...]) -> np.ndarray | None:
    """One run's finite repeats around their mean, rescaled by sqrt(n / (n - 1)) (None for fewer
    than 2): residuals around a statistic fitted to the same few values are smaller than the noise
    (around the median of 5, a fifth of them are exactly 0 and the MAD reads ~25% low). Cached by
    the values: a history replay asks for the same last runs at every run (read-only arrays)."""
    arr = np.asarray(run, dtype=float)
    arr = arr[np.isfinite(arr)]
    if len(arr) < 2:
        return None
    res = (arr - arr.mean()) * math.sqrt(len(arr) / (len(arr) - 1))
    res.flags.writeable = False
    return res


@functools.lru_cache(maxsize=4096)
def _t_isf(p: float, df: float) -> float:
    """Student t quantile, cached: the check asks for the same few dozen per call."""
    from scipy import stats  # imported when first needed (~1 s of CPU for every process otherwise)

    return float(stats.t.isf(p, df))


def _none(reason: str) -> Verdict:
    return Verdict(NONE, None, None, None, None, None, None, 0.0, 0, reason)


def _samples_check(
    y: np.ndarray,
    keep: np.ndarray,
    samples: Sequence[Sequence[float] | None],
    *,
    direction: str,
    min_effect: float,
    alpha: float,
    alpha_z: float = DEFAULT_ALPHA,
) -> Verdict:
    """Short history: the newest run's samples against the pooled samples of the runs before it."""

    def _arr(pos: int) -> np.ndarray:
        run = samples[pos]
        arr = np.asarray(run if run is not None else [], dtype=float)
        return arr[np.isfinite(arr)]

    newest = _arr(int(keep[-1]))
    before_runs = [_arr(int(p)) for p in keep[-6:-1]]
    before = np.concatenate(before_runs) if before_runs else np.empty(0)
    if len(newest) < 3 or len(before) < 3:
        return _none("baseline too short, and too few repeated samples to compare runs")
    level_before = float(np.median(y[-6:-1]))
    level_after = float(y[-1])
    shift = level_after - level_before
    if shift == 0:
        return _none("no shift")
    from scipy import stats

    test = stats.mannwhitneyu(newest, before, alternative="greater" if shift > 0 else "less")
    p = float(test.pvalue)
    if p > alpha:
        return _none(f"samples do not differ (Mann-Whitney {numbers.p_value_text(p)})")
    # Ranks alone say "different", not "by how much": with a few runs checked per series, p < 0.002
    # happens by chance. The mean shift must also stand out of the runs' own spread at the main
    # check's false-alarm rate (Welch-like z on pooled robust spreads).
    spread, _, df = _within_run_se(samples, keep[-6:])
    if spread > 0:
        z = abs(float(np.mean(newest) - np.mean(before))) / (
            spread * math.sqrt(1 / len(newest) + 1 / len(before))
        )
        if z < _t_isf(alpha_z, max(1.0, df)):
            return _none(
                f"newest run's samples differ (Mann-Whitney {numbers.p_value_text(p)}) but by only {z:.1f} sigma"
            )
    if _relative(level_before, shift) < min_effect:
        return _none("shift below the minimum effect")
    return Verdict(
        kind=_kind(shift, direction),
        change_index=int(keep[-1]),
        level_before=level_before,
        spread_before=robust_sigma(before),
        level_after=level_after,
        spread_after=robust_sigma(newest),
        pct_change=_pct(level_before, level_after),
        confidence=1.0 - p,
        results_after=1,
        reason=f"newest run's samples differ from the previous runs' (Mann-Whitney {numbers.p_value_text(p)})",
    )


def check_latest(
    values: Sequence[float] | np.ndarray,
    *,
    direction: str,
    samples: Sequence[Sequence[float] | None] | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
    baseline: int = 0,
    alpha: float = DEFAULT_ALPHA,
    alpha_samples: float = DEFAULT_ALPHA_SAMPLES,
    max_after: int = DEFAULT_MAX_AFTER,
    max_baseline: int = DEFAULT_MAX_BASELINE,
    min_baseline: int = DEFAULT_MIN_BASELINE,
) -> Verdict:
    """Is the newest result (with the last few) a real shift against the current baseline?

    ``values`` in run order, NaN for a missing result; ``samples`` (optional) aligned with
    ``values``, each a run's repeated measurements or None; ``baseline`` the index where the
    current baseline starts (last accepted change or expected-change mark). See the module
    docstring (1.) for the method.
    """
    _check_direction(direction)
    if samples is not None and len(samples) != len(values):
        raise ValueError(f"samples has {len(samples)} entries for {len(values)} values")
    keep, y = _finite(values)
    if baseline:
        mask = keep >= baseline
        keep, y = keep[mask], y[mask]
    m = len(y)
    if m < 2:
        return _none("too few results since the baseline")
    k_max = min(max_after, m - min_baseline)
    if k_max < 2:
        if samples is not None:
            return _samples_check(
                y, keep, samples, direction=direction, min_effect=min_effect, alpha=alpha_samples
            )
        return _none(f"baseline too short (needs {min_baseline} results and 2 after)")

    run_spread, run_se, sample_df = 0.0, 0.0, 0.0
    if samples is not None:
        # The last runs' repeats are plenty (40 runs of 5 give ~60 degrees of freedom) and keep the
        # cost flat on long histories.
        run_spread, run_se, sample_df = _within_run_se(samples, keep[-_SAMPLE_RUNS:])

    newest_shift_sign = 0.0
    passing: list[tuple[int, float, float, float, float, float, int]] = []  # k, z, df, level, sigma, n, cut
    far_off = False
    # Each window k is tested against the results just before it; the baseline statistics are
    # computed at a few cut points (the smallest cut >= k), so a check costs a handful of medians.
    cuts = sorted({c for c in (2, 4, 8, 16) if c < k_max} | {k_max})
    stats_at: dict[int, Baseline] = {}

    def baseline_at(cut: int) -> Baseline:
        if cut not in stats_at:
            stats_at[cut] = baseline_estimate(
                y[max(0, m - cut - max_baseline) : m - cut], run_se=run_se, sample_df=sample_df
            )
        return stats_at[cut]

    recent = [float(v) for v in y[m - k_max :]]  # plain floats: windows of <= 30 are faster in Python
    ordered = [recent[-1]]
    for k in range(2, k_max + 1):
        bisect.insort(ordered, recent[-k])  # the window's values in order, grown one at a time
        cut = next(c for c in cuts if c >= k)
        base = baseline_at(cut)
        sigma, df, n_base = base.sigma, base.df, base.n
        # The baseline's level where the window is (its end when it has no trend), and the
        # variance of that level in units of sigma^2.
        centre = cut - (k - 1) / 2.0  # window centre, counted from the baseline's last result
        level_before = base.level_at(centre)
        base_var = base.level_var(centre)
        newest_shift = y[-1] - base.level_at(cut)
        if newest_shift == 0:
            continue
        up = newest_shift > 0
        newest_shift_sign = 1.0 if up else -1.0
        if k == 2 and abs(newest_shift) > _t_isf(alpha, df) * sigma * math.sqrt(1.0 + base_var):
            far_off = True
        if k == 2:
            # Both results must be off: the smaller shift, tested at alpha ** 0.6 (two independent
            # tails must both be crossed), so a lone wild value never carries it. Correlated noise
            # makes the two tails one: the exponent moves towards 1 with phi.
            shift = (ordered[0] if up else ordered[-1]) - level_before
            z_needed = _t_isf(alpha ** (PAIR_EXPONENT + (1 - PAIR_EXPONENT) * base.phi), df)
            z = abs(shift) / (sigma * math.sqrt(1.0 + base_var)) if (shift > 0) == up else 0.0
        else:
            if k == 3:
                # Three results: drop the most extreme on the shifted side (a wild value plus two
                # ordinary ones must not pass), the mean of the other two.
                kept = ordered[:-1] if up else ordered[1:]
                level, n_eff = sum(kept) / 2, 2
            else:
                # Mean of the window winsorized at +/- 3 sigma around its own median: a wild value
                # moves it by at most 3 sigma / k, a real step keeps its full height.
                mid = (ordered[(k - 1) // 2] + ordered[k // 2]) / 2
                lo, hi = mid - 3 * sigma, mid + 3 * sigma
                # ``ordered`` is sorted: the values below lo and above hi are its ends. The same
                # additions in the same order as summing each value clipped, without a call per value.
                below, above = bisect.bisect_left(ordered, lo), bisect.bisect_right(ordered, hi)
                clipped = [lo] * below + ordered[below:above] + [hi] * (k - above)
                level, n_eff = sum(clipped) / k, k
            shift = level - level_before
            z_needed = _t_isf(alpha, df)
            window_var = base.mean_factor(n_eff) / n_eff
            z = abs(shift) / (sigma * math.sqrt(window_var + base_var)) if (shift > 0) == up else 0.0
        if z == 0.0 or abs(newest_shift) < abs(shift) / 2:
            continue  # wrong side, or the newest result went back: whatever moved did not last
        if _relative(level_before, shift) < min_effect:
            continue
        if z >= z_needed:
            passing.append((k, z / z_needed, df, level_before, sigma, float(n_base), cut))
    if not passing:
        if far_off and newest_shift_sign:
            return _none("newest result is far off; waiting for a second result to confirm")
        return _none("no significant sustained shift")

    k_long = max(p[0] for p in passing)
    best = max(passing, key=lambda p: p[1])
    _, ratio, df, level_before, sigma, n_base_f, cut = best
    n_base = int(n_base_f)
    base = baseline_at(cut)
    # The baseline's level along its own line (flat without a trend), per position in ``y``.
    base_end = m - cut - 1
    # Locate the change inside the longest passing window: the split maximising the two-sample
    # mean difference (CUSUM argmax) of the results less the baseline's line, with the baseline
    # as the left side's prior.
    first = max(0, m - k_long - n_base)
    line = base.level_end + base.slope * (np.arange(first, m) - base_end)
    seg = y[first:] - line
    lead = len(seg) - k_long
    start = _cusum_argmax(seg, lo=max(1, lead // 2), hi=len(seg) - 2)
    change = first + start
    after = y[change:]
    trend = base.slope != 0
    if trend:
        level_before = float(line[start])
        level_after = level_before + float(np.median(seg[start:]))
    else:
        level_after = float(np.median(after))
    z_alpha = _t_isf(alpha, df)
    from scipy import stats

    p = float(stats.t.sf(ratio * z_alpha, df))
    shift = level_after - level_before
    return Verdict(
        kind=_kind(shift if shift != 0 else newest_shift_sign, direction),
        change_index=int(keep[change]),
        level_before=level_before,
        spread_before=sigma,
        level_after=level_after,
        # The results after the change have a spread of their own from 3 on; fewer have none
        # (the baseline's would pass for theirs: "± 62.4" before and after alike).
        spread_after=robust_sigma(after) if len(after) >= SPREAD_MIN_RESULTS else None,
        pct_change=_pct(level_before, level_after),
        confidence=1.0 - p,
        results_after=len(after),
        reason=f"{len(after)} results shifted, {ratio:.1f}x the evidence needed, against {n_base} baseline results"
        + (" (level extrapolated along the baseline's trend)" if trend else ""),
    )


def _cusum_argmax(y: np.ndarray, *, lo: int, hi: int) -> int:
    """The split t in [lo, hi] maximising |mean(y[:t]) - mean(y[t:])| * sqrt(t (n-t) / n)."""
    n = len(y)
    csum = np.cumsum(y)
    t = np.arange(max(lo, 1), min(hi, n - 1) + 1)
    left = csum[t - 1] / t
    right = (csum[-1] - csum[t - 1]) / (n - t)
    score = np.abs(left - right) * np.sqrt(t * (n - t) / n)
    return int(t[int(np.argmax(score))])


def segment(
    values: Sequence[float] | np.ndarray,
    *,
    direction: str = "higher",
    min_effect: float = DEFAULT_MIN_EFFECT,
    min_size: int = DEFAULT_MIN_SIZE,
    threshold: float | None = None,
) -> list[ChangePoint]:
    """Change points of a whole history, in order. See the module docstring (2.) for the method.

    ``threshold`` (optional) is the z a split must reach; it sets the penalty to its square
    (the default penalty grows with the series' length, see ``segmentation``).
    """
    _check_direction(direction)
    if min_size < 1:
        raise ValueError("min_size must be at least 1")
    keep, y = _finite(values)
    n = len(y)
    if n < 2 * min_size:
        return []

    def effect_ok(before: float, after: float) -> bool:
        return _relative(before, after - before) >= min_effect

    found = segmentation.find_changes(
        y, min_size=min_size, effect_ok=effect_ok, penalty=None if threshold is None else threshold**2
    )
    fits, cps = found.fits, found.changes
    bounds = [0, *cps, n]
    out: list[ChangePoint] = []
    for i in range(1, len(bounds) - 1):
        a, t, b = bounds[i - 1], bounds[i], bounds[i + 1]
        before, after = y[a:t], y[t:b]
        _, left_end, left_line = found.ends(a, t)
        right_start, _, right_line = found.ends(t, b)
        # A constant segment is reported by its median (robust, as people read it); a line by its
        # fitted value at the change, where the jump is.
        level_before = left_end if left_line else float(np.median(before))
        level_after = right_start if right_line else float(np.median(after))
        z = segmentation.jump_z(fits, a, t, b)
        from scipy import stats

        p = min(1.0, 2.0 * float(stats.norm.sf(z)) * max(1, b - a - 2 * min_size + 1))
        out.append(
            ChangePoint(
                index=int(keep[t]),
                level_before=level_before,
                spread_before=_spread(before, left_line),
                level_after=level_after,
                spread_after=_spread(after, right_line),
                pct_change=_pct(level_before, level_after),
                confidence=1.0 - p,
                kind=_kind(level_after - level_before, direction),
            )
        )
    return out


def _spread(values: np.ndarray, line: bool) -> float:
    """Robust spread of a segment: about its own straight line when it trends, so the trend does
    not read as noise."""
    if not line or len(values) < 3:
        return robust_sigma(values)
    t = np.arange(len(values), dtype=float)
    slope, intercept = np.polyfit(t, values, 1)
    return robust_sigma(values - (intercept + slope * t))
