"""The offline segmentation as it was before the realistic-series rework, frozen for comparison.

``bench/detection.py`` prints it next to the current detector ("old rule"): binary segmentation
of means, noise from the MAD of first differences (independence assumed), threshold
sqrt(2 ln n) + 1.5, pruning, minimum effect. Returns the change indices only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from accelboard.alerts.baseline import sigma_floor as _sigma_floor
from accelboard.alerts.detection import DEFAULT_MIN_EFFECT, DEFAULT_MIN_SIZE, _finite, _relative

_MAD_TO_SIGMA = 1.4826


def _winsorize(y: np.ndarray, sigma: float) -> np.ndarray:
    trend = ndimage.median_filter(y, size=5, mode="nearest")
    return trend + np.clip(y - trend, -3 * sigma, 3 * sigma)


def diff_sigma(y: np.ndarray) -> float:
    """Noise from first differences: steps and slow trends barely move it."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(_MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def default_threshold(n: int) -> float:
    return math.sqrt(2 * math.log(max(n, 2))) + 1.5


def _split_z(csum: np.ndarray, a: int, t: int, b: int, sigma: float) -> float:
    """Two-sample z of mean(y[a:t]) vs mean(y[t:b]) from a cumulative sum with csum[0] = 0."""
    nl, nr = t - a, b - t
    diff = (csum[b] - csum[t]) / nr - (csum[t] - csum[a]) / nl
    return abs(diff) / (sigma * math.sqrt(1 / nl + 1 / nr))


def old_segment(
    values: Sequence[float] | np.ndarray,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    min_size: int = DEFAULT_MIN_SIZE,
    threshold: float | None = None,
) -> list[int]:
    """Change indices of a whole history, in order, as the detector found them before."""
    if min_size < 1:
        raise ValueError("min_size must be at least 1")
    keep, y = _finite(values)
    n = len(y)
    if n < 2 * min_size:
        return []
    sigma = max(diff_sigma(y), _sigma_floor(float(np.median(y))))
    w = _winsorize(y, sigma)
    csum = np.concatenate([[0.0], np.cumsum(w)])
    z_needed = default_threshold(n) if threshold is None else threshold

    def effect_ok(a: int, t: int, b: int) -> bool:
        left = (csum[t] - csum[a]) / (t - a)
        right = (csum[b] - csum[t]) / (b - t)
        return _relative(left, right - left) >= min_effect

    cps: list[int] = []
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        if b - a < 2 * min_size:
            continue
        t = np.arange(a + min_size, b - min_size + 1)
        nl, nr = t - a, b - t
        left = (csum[t] - csum[a]) / nl
        right = (csum[b] - csum[t]) / nr
        z = np.abs(right - left) / (sigma * np.sqrt(1 / nl + 1 / nr))
        best = int(t[int(np.argmax(z))])
        if float(z.max()) >= z_needed and effect_ok(a, best, b):
            cps.append(best)
            stack.extend([(a, best), (best, b)])
    cps.sort()

    # Prune: re-test each change against its neighbours; drop the weakest failing until all pass.
    while cps:
        bounds = [0, *cps, n]
        scores = []
        for i in range(1, len(bounds) - 1):
            a, t, b = bounds[i - 1], bounds[i], bounds[i + 1]
            ok = effect_ok(a, t, b)
            z = _split_z(csum, a, t, b, sigma)
            scores.append(z if ok else -1.0)
        weakest = int(np.argmin(scores))
        if scores[weakest] >= z_needed:
            break
        del cps[weakest]

    # Locate: the search above keeps ``min_size`` points on each side of a candidate, so a step
    # with fewer results after it than that is found one or more runs early. Each kept change
    # moves to the best split near it, with at least two points on each side.
    for i, t in enumerate(cps):
        a = cps[i - 1] if i else 0
        b = cps[i + 1] if i + 1 < len(cps) else n
        lo, hi = max(a + 2, t - min_size), min(b - 2, t + min_size)
        if lo < hi:
            scores = [_split_z(csum, a, c, b, sigma) for c in range(lo, hi + 1)]
            cps[i] = lo + int(np.argmax(scores))

    return [int(keep[t]) for t in cps]
