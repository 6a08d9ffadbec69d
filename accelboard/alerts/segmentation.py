"""Offline change points of a whole series: pure numpy/scipy, no ORM, deterministic.

``segment`` (re-exported by ``detection``) answers "where did the level jump?" on a history that
may also drift, wander and repeat weekly. What it does, in order:

1. Noise model (``noise_model``), estimated from differences so that steps and trends barely
   move it:
   a. Seasonality: for each period p in (7, 12, 24) with at least four cycles, the residuals of
      a centred moving average of width p are grouped by phase; when the per-phase medians are
      significant (Kruskal-Wallis, p < 1e-4) and remove at least 20% of the residual variance,
      the profile of the best period is subtracted. A step moves a handful of residuals per
      phase, not their medians.
   b. Scale: lag-1 and lag-2 differences, centred on their median (which removes a linear
      trend), winsorized at 3 robust sigmas (steps and outliers are a few differences) and
      averaged: v1, v2. For AR(1) noise of marginal variance s2 and coefficient phi,
      v1 = 2 s2 (1 - phi) and v2 = 2 s2 (1 - phi^2), so phi = v2 / v1 - 1 (clipped to
      [0, 0.9] and shrunk towards 0 on short series, where the ratio is noisy).
   c. ``sigma_lr``: the long-run standard deviation s sqrt((1 + phi) / (1 - phi)), the unit in
      which means and slopes of autocorrelated noise vary. Independent noise gives phi ~ 0 and
      sigma_lr = sigma = the MAD of first differences / sqrt(2), the old estimate.
   d. A drifting level (a random walk under the noise) that lag-1 and lag-2 differences cannot
      see: on 200 points or more, the spread of differences between adjacent block means of
      sqrt(n) points (``block_unit``) is read as a long-run sigma too, and the larger is used.
   e. Scale: a positive series spanning a factor of 1.5 or more whose noise grows with its level
      (``multiplicative``) is segmented on its logarithm, so an exponential trend is a line;
      levels are reported back on the values' own scale.
2. Model: each segment is a constant, or a line when its slope pays for itself (a penalty of
   ``SLOPE_PENALTY`` x log n in sigma_lr^2 units), so a smooth trend is one segment rather than a
   staircase. Values are first winsorized around a running median (width 5) at +/- 3 sigma, so a
   lone outlier cannot open a segment while a step keeps its full height.
3. Penalised search: candidates come from binary segmentation over the whole series and over
   seeded intervals (halving lengths, half-overlapping, so two close opposite steps are seen);
   then the exact optimum over the candidates (dynamic programming) of
   sum(segment cost) / sigma_lr^2 + penalty x (number of changes), with
   penalty = ``PENALTY`` x log n x (1 + ``SHORT`` / n): it grows with the series' length (more
   places a spurious split could go), is in units of the robust long-run noise, and is stricter
   on short series whose noise estimate is itself uncertain.
4. Each change must be a jump: the fitted levels on either side of it (a constant's median, a
   line's value at the boundary) must differ by at least ``min_effect`` relative to the level
   before. A change in slope alone is not a step; a failing change is dropped and the search
   re-run without it. Kept changes are re-located to the best split within ``min_size`` points.
5. Report: levels before/after at the boundary, robust spreads, % change, confidence 1 - p with
   p = 2 sf(z) x (places the split could go) for the jump's z (a Bonferroni bound: conservative,
   not calibrated), and the kind by direction.

Known limits: a change in variance alone is not reported (the model shifts levels only); a
steep curve (an exponential over many noise widths) may be approximated by two lines with a
small jump at the bend, which passes only when the jump clears the minimum effect and the
penalty; seasonality other than periods 7, 12 and 24 is treated as noise (it inflates the noise
estimate: fewer, later detections).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PENALTY = 3.0  # x log n, in units of sigma_lr^2 (BIC would be ~2 for one mean and a location)
SHORT = 20.0  # the penalty grows by (1 + SHORT / n): 2x at n = 20, 1.2x at n = 100
SLOPE_PENALTY = 2.0  # x log n: what a segment's slope must save to be used
PERIODS = (7, 12, 24)
SEASON_ALPHA = 1e-4
SEASON_MIN_GAIN = 0.2
PHI_MAX = 0.9
_MAD_TO_SIGMA = 1.4826
_WINSOR = 3.0
# E[min(Z^2, 9)] for standard normal Z: a 3-sigma winsorized variance reads this fraction of it,
# (2 Phi(3) - 1) - 6 phi(3) + 18 (1 - Phi(3)), as scipy.stats.norm computes it (a test checks).
# A literal: scipy.stats costs ~1 s to import, and every process that loads the URLs imports this.
_WINSOR_VAR = 0.9950072780344534

# ``effect_ok(before, after)``: whether a jump between two fitted levels is big enough to report.
EffectCheck = Callable[[float, float], bool]


@dataclass(frozen=True)
class NoiseModel:
    """What ``segment`` takes as noise: marginal sigma, AR(1) phi, long-run sigma, season removed."""

    sigma: float
    phi: float
    sigma_lr: float
    period: int | None
    seasonal: np.ndarray | None  # the profile subtracted, one value per point (None: none)


def median(values: np.ndarray) -> float:
    """``np.median`` of a 1-D array of finite floats, bit for bit, without its generic machinery.

    The detector takes a dozen medians of short windows per check; ``np.median``'s NaN check, axis
    handling and dispatch cost ~10x the sort itself there. The middle value, or the mean of the
    two middle values computed as ``np.median`` does ((a + b) / 2).
    """
    n = len(values)
    if n == 0:
        return math.nan
    half = n // 2
    ordered = values.copy()
    if n <= 1024:
        ordered.sort()
    else:
        ordered.partition([half - 1, half] if n % 2 == 0 else half)
    if n % 2:
        return float(ordered[half])
    return float((ordered[half - 1] + ordered[half]) / 2)


def percentiles(values: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(values, qs)`` (its default linear method) of finite floats, bit for bit, from
    one sort: the same virtual index, weight and two-sided interpolation as numpy's ``_lerp``."""
    ordered = np.sort(values)
    n = len(ordered)
    out: list[float] = []
    for q in qs:
        quantile = q / 100
        virtual = (n - 1) * quantile
        lo = math.floor(virtual)
        gamma = virtual - lo
        lo = min(max(lo, 0), n - 1)
        a, b = float(ordered[lo]), float(ordered[min(lo + 1, n - 1)])
        diff = b - a
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


def winsorized_scale(d: np.ndarray) -> float:
    """Standard deviation of ``d`` about its median, values beyond 3 robust sigmas clipped."""
    if len(d) == 0:
        return 0.0
    centre = median(d)
    mad = _MAD_TO_SIGMA * median(np.abs(d - centre))
    if mad == 0:
        return 0.0
    clipped = (d - centre).clip(-_WINSOR * mad, _WINSOR * mad)
    # np.mean is this sum (pairwise) over the count.
    return math.sqrt(float(np.add.reduce(clipped * clipped)) / len(clipped) / _WINSOR_VAR)


def _moving_average(y: np.ndarray, p: int) -> np.ndarray:
    """Centred moving average that cancels a period-p pattern (2 x p for even p); NaN at the ends."""
    w = np.ones(p + 1) / p if p % 2 == 0 else np.ones(p) / p
    if p % 2 == 0:
        w[0] = w[-1] = 0.5 / p
    out = np.full(len(y), np.nan)
    half = len(w) // 2
    out[half : len(y) - half] = np.convolve(y, w, mode="valid")
    return out


def seasonal_profile(
    y: np.ndarray, periods: tuple[int, ...] = PERIODS
) -> tuple[int | None, np.ndarray | None]:
    """The period and per-point seasonal component to subtract, or (None, None). See 1a."""
    n = len(y)
    best: tuple[float, int, np.ndarray] | None = None
    for p in periods:
        if n < 4 * p:
            continue
        r = y - _moving_average(y, p)
        idx = np.flatnonzero(np.isfinite(r))
        phase = idx % p
        groups = [r[idx[phase == j]] for j in range(p)]
        if min(len(g) for g in groups) < 3:
            continue
        medians = np.array([np.median(g) for g in groups])
        medians -= medians.mean()
        before = winsorized_scale(r[idx]) ** 2
        after = winsorized_scale(r[idx] - medians[phase]) ** 2
        if before <= 0 or after > (1 - SEASON_MIN_GAIN) * before:
            continue
        from scipy import stats  # imported when first needed: ~1 s, see _WINSOR_VAR

        if float(stats.kruskal(*groups).pvalue) >= SEASON_ALPHA:
            continue
        if best is None or after / before < best[0]:
            best = (after / before, p, medians)
    if best is None:
        return None, None
    _, p, medians = best
    return p, medians[np.arange(n) % p]


def noise_model(y: np.ndarray, *, deseason: bool = True) -> NoiseModel:
    """Marginal and long-run noise of ``y`` (finite values, in order). See 1."""
    period, seasonal = seasonal_profile(y) if deseason else (None, None)
    z = y - seasonal if seasonal is not None else y
    n = len(z)
    if n < 4:
        return NoiseModel(0.0, 0.0, 0.0, period, seasonal)
    v1 = winsorized_scale(np.diff(z)) ** 2
    phi = ar_phi(z)
    sigma = math.sqrt(v1 / (2.0 * (1.0 - phi))) if v1 > 0 else 0.0
    sigma_lr = sigma * math.sqrt((1.0 + phi) / (1.0 - phi))
    block = block_unit(z)
    if block > sigma_lr:
        sigma_lr = block
    return NoiseModel(sigma, phi, sigma_lr, period, seasonal)


def ar_phi(z: np.ndarray) -> float:
    """AR(1) coefficient from lag-1 and lag-2 differences (1b), in [0, 0.9], shrunk when short."""
    n = len(z)
    if n < 6:
        return 0.0
    v1 = winsorized_scale(np.diff(z)) ** 2
    if v1 <= 0:
        return 0.0
    v2 = winsorized_scale(z[2:] - z[:-2]) ** 2
    # The ratio is noisy on a short series (about +/- 0.3 at n = 30): shrink towards 0.
    return min(PHI_MAX, max(0.0, v2 / v1 - 1.0)) * n / (n + 30.0)


def block_unit(z: np.ndarray, *, min_points: int = 200) -> float:
    """Long-run sigma read at a scale of L = sqrt(n) points (see 1d); 0 under ``min_points``.

    The differences of adjacent block means, mean(z[t:t+L]) - mean(z[t-L:t]), vary as
    2 sigma_lr^2 / L under any stationary noise, and more where the level drifts (a random walk
    under the noise): their winsorized spread x sqrt(L / 2) is the noise a split between two
    segments of about L points must clear. A step moves 2L of the n - 2L differences, so the
    scale is kept at sqrt(n) (a few percent of them per step).
    """
    n = len(z)
    if n < min_points:
        return 0.0
    L = int(round(math.sqrt(n)))
    c = np.concatenate([[0.0], np.cumsum(z - np.median(z))])
    t = np.arange(L, n - L + 1)
    d = ((c[t + L] - c[t]) - (c[t] - c[t - L])) / L
    return winsorized_scale(d) * math.sqrt(L / 2.0)


class _Fits:
    """Constant and line fits of any segment [a, b) in O(1) from cumulative sums."""

    def __init__(self, y: np.ndarray, unit: float, slope_penalty: float) -> None:
        n = len(y)
        t = np.arange(n, dtype=float) - (n - 1) / 2.0
        self.centre = float(np.median(y))
        w = y - self.centre

        def cum(v: np.ndarray) -> np.ndarray:
            return np.concatenate([[0.0], np.cumsum(v)])

        self.s1, self.s2 = cum(w), cum(w * w)
        self.t1, self.t2, self.ty = cum(t), cum(t * t), cum(t * w)
        self.t = t
        self.unit = unit
        self.slope_penalty = slope_penalty

    def parts(self, a: np.ndarray | int, b: np.ndarray | int) -> tuple[np.ndarray, ...]:
        """(n, mean, slope, rss_const, rss_line) of [a, b) (arrays broadcast)."""
        n = np.asarray(b - a, dtype=float)
        s1 = self.s1[b] - self.s1[a]
        s2 = self.s2[b] - self.s2[a]
        t1 = self.t1[b] - self.t1[a]
        t2 = self.t2[b] - self.t2[a]
        ty = self.ty[b] - self.ty[a]
        mean = s1 / n
        rss0 = np.maximum(s2 - s1 * mean, 0.0)
        stt = t2 - t1 * t1 / n
        sty = ty - t1 * s1 / n
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(stt > 1e-9, sty / np.where(stt > 1e-9, stt, 1.0), 0.0)
        rss1 = np.maximum(rss0 - slope * sty, 0.0)
        return n, mean, slope, rss0, rss1

    def cost(self, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        """Segment cost in units of sigma_lr^2: the constant's, or the line's plus its penalty."""
        n, _, _, rss0, rss1 = self.parts(a, b)
        line = np.where(n >= 4, rss1 / self.unit + self.slope_penalty, np.inf)
        return np.minimum(rss0 / self.unit, line)

    def uses_line(self, a: int, b: int) -> bool:
        n, _, _, rss0, rss1 = self.parts(a, b)
        return bool(n >= 4 and rss1 / self.unit + self.slope_penalty < rss0 / self.unit)

    def ends(self, a: int, b: int) -> tuple[float, float, bool]:
        """Fitted value at the first and last point of [a, b) (uncentred), and whether it is a line."""
        n, mean, slope, _, _ = self.parts(a, b)
        if not self.uses_line(a, b):
            level = float(mean) + self.centre
            return level, level, False
        tbar = (self.t1[b] - self.t1[a]) / float(n)
        first = float(mean + slope * (self.t[a] - tbar)) + self.centre
        last = float(mean + slope * (self.t[b - 1] - tbar)) + self.centre
        return first, last, True


def _best_split(fits: _Fits, a: int, b: int, min_size: int) -> tuple[int, float]:
    """The split of [a, b) that lowers the cost most, and by how much (-inf when none fits)."""
    if b - a < 2 * min_size:
        return -1, -math.inf
    t = np.arange(a + min_size, b - min_size + 1)
    gain = fits.cost(a, b) - fits.cost(a, t) - fits.cost(t, b)
    i = int(np.argmax(gain))
    return int(t[i]), float(gain[i])


def _candidates(fits: _Fits, n: int, min_size: int, floor: float) -> list[int]:
    """Binary segmentation over the whole series and over seeded intervals (see 3.)."""
    found: set[int] = set()
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        t, gain = _best_split(fits, a, b, min_size)
        if t > 0 and gain > floor:
            found.add(t)
            stack.extend([(a, t), (t, b)])
    # Seeded intervals: lengths n/4, n/8, ... down to 4 x min_size (at most 6 levels), each level
    # covering the series with half-overlapping intervals.
    length = n // 4
    levels = 0
    while length >= 4 * min_size and levels < 6:
        step = max(1, length // 2)
        for a in range(0, n - length + 1, step):
            t, gain = _best_split(fits, a, a + length, min_size)
            if t > 0 and gain > floor:
                found.add(t)
        length //= 2
        levels += 1
    return sorted(found)


def _optimal(fits: _Fits, n: int, cands: list[int], penalty: float, min_size: int) -> list[int]:
    """Exact penalised optimum over the candidate change points (dynamic programming)."""
    points = np.array([0, *cands, n])
    k = len(points)
    best = np.full(k, np.inf)
    best[0] = -penalty
    prev = np.zeros(k, dtype=int)
    for j in range(1, k):
        starts = points[:j]
        ok = points[j] - starts >= min_size
        if not ok.any():
            continue
        total = best[:j] + fits.cost(starts, points[j]) + penalty
        total = np.where(ok, total, np.inf)
        i = int(np.argmin(total))
        best[j], prev[j] = total[i], i
    out = []
    j = k - 1
    while j > 0:
        j = int(prev[j])
        if j > 0:
            out.append(int(points[j]))
    return sorted(out)


@dataclass(frozen=True)
class Segmentation:
    """The change points (positions in the finite values) with the fits either side of them."""

    changes: list[int]
    noise: NoiseModel
    fits: _Fits
    penalty: float
    log_scale: bool = False  # the fits are of log(values): exponentiate their levels

    def ends(self, a: int, b: int) -> tuple[float, float, bool]:
        """Fitted levels at the first and last point of [a, b), on the values' own scale."""
        first, last, line = self.fits.ends(a, b)
        return (math.exp(first), math.exp(last), line) if self.log_scale else (first, last, line)


def multiplicative(y: np.ndarray) -> bool:
    """Whether the series is better read on a log scale: positive, spanning a factor of 1.5 or more,
    and with noise that grows with the level (the log makes the spread of differences in the
    lowest and highest thirds more alike than the raw values do). See 1e."""
    n = len(y)
    if n < 30 or float(np.min(y)) <= 0 or float(np.max(y)) < 1.5 * float(np.min(y)):
        return False
    order = np.argsort(y, kind="stable")
    low, high = order[: n // 3], order[-(n // 3) :]

    def spread_ratio(v: np.ndarray) -> float:
        d = np.abs(np.diff(v))
        # Differences whose both ends lie in the third: local noise, not the jump between thirds.
        lo_mask = np.isin(np.arange(n - 1), low) & np.isin(np.arange(1, n), low)
        hi_mask = np.isin(np.arange(n - 1), high) & np.isin(np.arange(1, n), high)
        if lo_mask.sum() < 5 or hi_mask.sum() < 5:
            return 1.0
        a, b = float(np.median(d[lo_mask])), float(np.median(d[hi_mask]))
        return max(a, b) / max(min(a, b), 1e-300)

    return spread_ratio(np.log(y)) < spread_ratio(y)


def _exp_levels(check: EffectCheck) -> EffectCheck:
    return lambda before, after: check(math.exp(before), math.exp(after))


def penalty_for(n: int) -> float:
    return PENALTY * math.log(max(n, 3)) * (1.0 + SHORT / max(n, 1))


def find_changes(
    y: np.ndarray,
    *,
    min_size: int,
    effect_ok: EffectCheck | None,
    penalty: float | None = None,
) -> Segmentation:
    """Steps 1-4 of the module docstring on finite values ``y``; ``effect_ok(before, after)``
    says whether a jump between two fitted levels is big enough to report."""
    n = len(y)
    log_scale = multiplicative(y)
    if log_scale:
        y = np.log(y)
    noise = noise_model(y)
    z = y - noise.seasonal if noise.seasonal is not None else y
    floor_sigma = max(abs(float(np.median(y))) * 1e-9, 1e-12)
    sigma = max(noise.sigma, floor_sigma)
    unit = max(noise.sigma_lr, floor_sigma) ** 2
    from scipy import ndimage  # imported when first needed, see _WINSOR_VAR

    trend = ndimage.median_filter(z, size=5, mode="nearest")
    w = trend + np.clip(z - trend, -_WINSOR * sigma, _WINSOR * sigma)
    log_n = math.log(max(n, 3))
    fits = _Fits(w, unit, SLOPE_PENALTY * log_n)
    beta = penalty_for(n) if penalty is None else penalty
    cands = _candidates(fits, n, min_size, floor=beta / 2)
    check = effect_ok if callable(effect_ok) else (lambda before, after: True)
    if log_scale:
        check = _exp_levels(check)
    while True:
        chosen = _optimal(fits, n, cands, beta, min_size)
        changes = _relocate(fits, chosen, n, min_size)
        failing = set()
        bounds = [0, *changes, n]
        for i in range(1, len(bounds) - 1):
            before = fits.ends(bounds[i - 1], bounds[i])[1]
            after = fits.ends(bounds[i], bounds[i + 1])[0]
            if not check(before, after):
                failing.add(chosen[i - 1])
        if not failing:
            return Segmentation(changes, noise, fits, beta, log_scale)
        # Drop the candidates whose change failed and re-run: each pass removes at least one.
        cands = [c for c in cands if c not in failing]


def _relocate(fits: _Fits, changes: list[int], n: int, min_size: int) -> list[int]:
    """Each change moved to the best split between its neighbours within ``min_size`` of it, with
    at least two points on each side: the search keeps ``min_size`` points on either side of a
    candidate, so a step with fewer results after it than that is found a few runs early."""
    out = list(changes)
    for i, t in enumerate(out):
        a = out[i - 1] if i else 0
        b = out[i + 1] if i + 1 < len(out) else n
        lo, hi = max(a + 2, t - min_size), min(b - 2, t + min_size)
        if lo < hi:
            c = np.arange(lo, hi + 1)
            total = fits.cost(a, c) + fits.cost(c, b)
            out[i] = int(c[int(np.argmin(total))])
    return out


def jump_z(fits: _Fits, a: int, t: int, b: int) -> float:
    """The jump at ``t`` between the fits of [a, t) and [t, b), in standard errors (sigma_lr)."""
    before = fits.ends(a, t)
    after = fits.ends(t, b)
    jump = after[0] - before[1]

    def var_end(lo: int, hi: int, line: bool, at: int) -> float:
        m = hi - lo
        if not line:
            return 1.0 / m
        tt = fits.t[lo:hi]
        return 1.0 / m + (fits.t[at] - tt.mean()) ** 2 / float(((tt - tt.mean()) ** 2).sum())

    se = math.sqrt(fits.unit * (var_end(a, t, before[2], t - 1) + var_end(t, b, after[2], t)))
    return abs(jump) / se if se > 0 else math.inf
