"""A series' baseline for change detection: its level (a line when it trends), noise and
dependence, estimated robustly from the results before a window. Pure numpy; used by
``detection.check_latest`` (and ``robust_sigma`` by the segmentation and the trends chart).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import segmentation

MAD_TO_SIGMA = 1.4826
MAD_EFFICIENCY = 0.37
_TAIL_MIN = 40  # baseline results needed before its 2.5/97.5 percentiles mean anything
_MEDIAN_VAR = math.pi / 2  # variance of a sample median relative to a mean, normal noise
_DRIFT_MIN = 40  # baseline results needed to read a wandering level (block means of ~6-14)


def robust_sigma(values: np.ndarray) -> float:
    """1.4826 x MAD: the standard deviation for normal noise, unmoved by a minority of outliers."""
    if len(values) == 0:
        return 0.0
    med = segmentation.median(values)
    return float(MAD_TO_SIGMA * segmentation.median(np.abs(values - med)))


def sigma_floor(level: float) -> float:
    # Constant series have MAD 0; a tiny floor keeps the statistics finite and lets any real
    # step through (the minimum effect still applies).
    return max(abs(level) * 1e-9, 1e-12)


@dataclass(frozen=True)
class Baseline:
    """The results a window is compared with: level (a line when it trends), noise, dependence."""

    level_end: float  # level at the baseline's last result
    slope: float  # per result; 0 when the baseline shows no significant trend
    slope_se: float
    sigma: float  # marginal noise of one result
    df: float
    n: int
    phi: float  # AR(1) coefficient of the noise (0 for independent noise)
    walk: float  # variance per result of a wandering level (random walk), over sigma^2; 0 when steady

    def level_at(self, offset: float) -> float:
        """The baseline's level ``offset`` results after its last one."""
        return self.level_end + self.slope * offset

    def level_var(self, offset: float) -> float:
        """Variance of ``level_at(offset)`` in units of sigma^2."""
        # A wandering level moves between the baseline's middle (n/3 results back on average, for
        # a random walk) and the window: that variance grows with the distance.
        var = _MEDIAN_VAR / self.n * _long_run(self.phi) + self.walk * (self.n / 3.0 + max(offset, 0.0))
        if self.slope:
            var += ((offset + (self.n - 1) / 2.0) * self.slope_se / self.sigma) ** 2
        return var

    def mean_factor(self, k: int) -> float:
        """Variance of the mean of k consecutive results over sigma^2 / k (1 for independent noise)."""
        phi = self.phi
        if phi <= 0:
            return 1.0
        return (1 + phi) / (1 - phi) - 2 * phi * (1 - phi**k) / (k * (1 - phi) ** 2)


def _long_run(phi: float) -> float:
    return (1 + phi) / (1 - phi)


TREND_T = 2.5  # a baseline's slope is used from this many standard errors (a step outruns a trend test)


def _best_step(base: np.ndarray) -> tuple[np.ndarray, float]:
    """The baseline less its best single step (two levels, split where it fits best) and the
    residual sum of squares of that fit."""
    n = len(base)
    centred = base - segmentation.median(base)
    c = np.cumsum(centred)
    c2 = np.cumsum(centred**2)
    k = np.arange(2, n - 1)
    rss = (c2[k - 1] - c[k - 1] ** 2 / k) + ((c2[-1] - c2[k - 1]) - (c[-1] - c[k - 1]) ** 2 / (n - k))
    split = int(k[int(np.argmin(rss))])
    fitted = np.where(np.arange(n) < split, c[split - 1] / split, (c[-1] - c[split - 1]) / (n - split))
    return centred - fitted, float(np.min(rss))


def _steady_slope(base: np.ndarray, slope: float) -> bool:
    """Whether a line fits the baseline better than one step does: a trend does, a step inside the
    baseline (a shift creeping into it once it is older than the longest window) does not."""
    n = len(base)
    t = np.arange(n) - (n - 1) / 2.0
    resid = base - slope * t
    line = float(np.sum((resid - resid.mean()) ** 2))
    # The step is chosen among n places: it fits noise better by about 2 ln n variances.
    noise = segmentation.winsorized_scale(np.diff(base)) ** 2 / 2.0
    return line < _best_step(base)[1] + 2.0 * math.log(n) * noise


def baseline_estimate(base: np.ndarray, *, run_se: float, sample_df: float) -> Baseline:
    """Level, noise, AR(1) dependence, drift and trend of the baseline results (in order)."""
    level, slope, slope_se, sigma_series, df, n_base, phi, walk = baseline_of_results(
        np.ascontiguousarray(base, dtype=np.float64).tobytes()
    )
    sigma = sigma_series
    if run_se > 0 and sigma_series <= 2 * run_se:
        # The series spreads no more than twice what its own repeats say: the repeats'
        # many degrees of freedom carry the noise estimate, at the larger of the two.
        sigma, df = max(sigma_series, run_se), max(df, sample_df)
    elif run_se > sigma:
        sigma = run_se  # a run cannot be more precise than its own samples say
    return Baseline(level, slope, slope_se, sigma, df, n_base, phi, walk)


@functools.lru_cache(maxsize=8192)
def baseline_of_results(key: bytes) -> tuple[float, float, float, float, float, int, float, float]:
    """``_baseline``'s statistics of the results alone (``key``: their float64 bytes), cached: a
    history replay (``alerts_history_check``) asks for the same windows at several runs."""
    base = np.frombuffer(key, dtype=np.float64).copy()
    n_base = len(base)
    phi = segmentation.ar_phi(base)
    level = segmentation.median(base)
    sigma_series = max(robust_sigma(base), sigma_floor(level))
    slope = slope_se = 0.0
    half = n_base // 2
    if half >= 10:
        # Slope as the median of differences between results half the baseline apart, divided by
        # that distance: robust to outliers, O(n). Its standard error from the median's variance
        # (pi/2 of a mean's) over n/2 pairs, widened by the long-run variance of AR noise.
        diffs = base[half : 2 * half] - base[:half]
        estimate = segmentation.median(diffs) / half
        se = math.sqrt(_MEDIAN_VAR * 2 * _long_run(phi) / half) * sigma_series / half
        if se > 0 and abs(estimate) > TREND_T * se and _steady_slope(base, estimate):
            slope, slope_se = estimate, se
            t = np.arange(n_base) - (n_base - 1) / 2.0
            resid = base - slope * t
            level = segmentation.median(resid) + slope * (n_base - 1) / 2.0
            sigma_series = max(robust_sigma(resid), sigma_floor(level))
            base = resid
    if n_base >= _TAIL_MIN:
        # Heavy tails: the MAD sees only the centre. The central 95% of a long baseline,
        # read as +/- 1.96 sigma, is the same for normal noise and larger for fat tails.
        lo, hi = segmentation.percentiles(base, (2.5, 97.5))
        sigma_series = max(sigma_series, float(hi - lo) / (2 * 1.96))
    # The MAD has about 37% of the standard deviation's efficiency: fewer degrees of freedom.
    df = max(1.0, MAD_EFFICIENCY * (n_base - 1))
    walk = 0.0
    if n_base >= _DRIFT_MIN:
        # A wandering level: results k = n/4 apart differ by 2 sigma^2 under steady noise (AR or
        # not, once k is past its memory) plus k times the walk's variance per result. Only a
        # spread clearly above the steady one (3 standard errors) is read as a walk.
        # A step inside the baseline would read as a walk: it is taken out first.
        lag = n_base // 4
        rest = _best_step(base)[0]
        far = segmentation.winsorized_scale(rest[lag:] - rest[:-lag]) ** 2
        steady = segmentation.winsorized_scale(np.diff(rest)) ** 2 / (1.0 - phi)
        if steady > 0 and far > steady * (1 + 3 * math.sqrt(2.0 / (n_base - lag))):
            walk = (far - steady) / lag / sigma_series**2
    return level, slope, slope_se, sigma_series, df, n_base, phi, walk
