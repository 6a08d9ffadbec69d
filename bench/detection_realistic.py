"""The realistic labelled set of ``bench/detection.py`` and the standard references scored on it.

Generated here, seeded, never read from a file: series with the traits of benchmark and
production histories, each labelled with the indices where a new level starts.

Families (lengths log-uniform in 20-1,000 unless said; level 100, noise 1-5% of it):

1. ``ar``: steps on AR(1) noise, phi = 0, 0.5 or 0.8 (the marginal sigma fixed, so phi = 0.8
   wanders slowly around the level).
2. ``walk``: a drifting baseline, a random walk whose steps are 5-25% of the noise (over 1,000
   points it wanders by 2-8 noise widths), under independent noise.
2. ``trend``: a linear trend moving the level by 10-60% over the series, AR(1) phi = 0 or 0.5.
3. ``exp``: an exponential trend (x1.5 to x4 over the series, or its inverse), noise
   proportional to the level.
4. ``season``: a weekly pattern (period 7, weekend dip plus a random profile) of 1-3 sigma.
5. ``variance``: the noise's standard deviation x2.5-4 from a point on (labelled: a change).
6. ``heavy``: Student t noise with 3 degrees of freedom (scaled to the same robust sigma) and
   a few unlabelled 6-sigma outliers.
7. ``missing``: AR(1) phi = 0.3 with 5-15% of the points missing (NaN, kept in the index).
8. ``short``: 20-60 points, phi = 0 or 0.5.

In every family about a third of the series have no change; the others 1-3 steps (1 on short
series) of 3-8 marginal sigmas (and at least 3% of the level), placed at least 15 points apart
and 8 from the ends. Steps are level shifts: on a trend, the trend continues from the new level.

Scores (van den Burg & Williams 2020, "An evaluation of change point detection algorithms"):
F1 with a margin of 5 points, where the true and the predicted sets both include index 0 (so
predicting nothing scores 2 / (k + 2) on a series with k changes, and 1 on one without), and
the segmentation cover (Arbelaez et al. 2011), each averaged over the series.

References, with the textbook penalty on the same series (NaN dropped, indices mapped back):
binary segmentation and PELT of means (squared-error cost, minimum segment 2, every position
allowed), penalty 2 sigma^2 ln n (BIC: a mean and a location per change), sigma from the MAD of
first differences / sqrt 2. Both are implemented here in numpy (PELT from ``ruptures`` is pure
Python and takes seconds per 1,000-point series); when ``ruptures`` is installed the bench checks
that they return the same change points as ``ruptures.Binseg`` / ``ruptures.Pelt`` on the short
series.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

LEVEL = 100.0
MARGIN = 5
FAMILIES = ("ar", "walk", "trend", "exp", "season", "variance", "heavy", "missing", "short")


@dataclass
class Case:
    values: np.ndarray
    changes: list[int]
    family: str
    tags: dict[str, object] = field(default_factory=dict)


def _ar(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """Unit-variance AR(1) noise, started from its stationary distribution."""
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    x = np.empty(n)
    x[0] = rng.standard_normal()
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def _length(rng: np.random.Generator, lo: int = 20, hi: int = 1000) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _positions(rng: np.random.Generator, n: int, k: int) -> list[int]:
    """k change positions, >= 15 apart and >= 8 from either end (fewer when n is too short)."""
    out: list[int] = []
    for _ in range(50):
        if len(out) == k:
            break
        p = int(rng.integers(8, n - 8)) if n > 16 else -1
        if p > 0 and all(abs(p - q) >= 15 for q in out):
            out.append(p)
    return sorted(out)


def _steps(rng: np.random.Generator, n: int, *, short: bool = False) -> list[int]:
    if rng.random() < 1 / 3:
        return []
    k = 1 if short or n < 60 else int(rng.integers(1, 4))
    return _positions(rng, n, k)


def _levels(rng: np.random.Generator, n: int, changes: list[int], sigma: float, level: float) -> np.ndarray:
    """Additive level offsets: each step 2.5-8 sigma (and >= 3% of the level), random sign."""
    offset = np.zeros(n)
    for p in changes:
        size = max(rng.uniform(2.5, 8) * sigma, 0.03 * abs(level)) * rng.choice([-1.0, 1.0])
        offset[p:] += size
    return offset


def make_case(rng: np.random.Generator, family: str) -> Case:
    pct = float(rng.choice([0.5, 1.0, 2.0, 3.0, 5.0, 10.0]))
    sigma = LEVEL * pct / 100
    n = int(rng.integers(20, 61)) if family == "short" else _length(rng)
    # One series in five varies around 0 (a difference, a residual): no relative scale.
    level = 0.0 if family != "exp" and rng.random() < 0.2 else LEVEL
    tags: dict[str, object] = {"n": n, "pct": pct, "level": level}
    if family == "variance":
        changes = _positions(rng, n, 1) if rng.random() > 1 / 3 else []
        scale = np.ones(n)
        for p in changes:
            scale[p:] = rng.uniform(2.5, 4.0)
        return Case(level + sigma * scale * rng.standard_normal(n), changes, family, tags)
    changes = _steps(rng, n, short=family == "short")
    if family == "ar":
        phi = float(rng.choice([0.0, 0.5, 0.8]))
        tags["phi"] = phi
        x = level + _levels(rng, n, changes, sigma, level) + sigma * _ar(rng, n, phi)
    elif family == "walk":
        # A baseline that drifts: a random walk of 5-25% of the noise per point under the noise.
        drift = rng.uniform(0.05, 0.25) * sigma * np.cumsum(rng.standard_normal(n))
        tags["drift"] = True
        x = level + drift + _levels(rng, n, changes, sigma, level) + sigma * rng.standard_normal(n)
    elif family == "trend":
        phi = float(rng.choice([0.0, 0.5]))
        total = rng.uniform(0.10, 0.60) * rng.choice([-1.0, 1.0]) * LEVEL  # also around 0
        tags["phi"] = phi
        x = (
            level
            + total * np.arange(n) / n
            + _levels(rng, n, changes, sigma, level)
            + sigma * _ar(rng, n, phi)
        )
    elif family == "exp":
        factor = rng.uniform(1.5, 4.0) ** rng.choice([-1.0, 1.0])
        curve = factor ** (np.arange(n) / n)
        # Steps and noise relative to the level, as for a growing count or price.
        x = (
            LEVEL
            * curve
            * (1 + _levels(rng, n, changes, sigma, level) / LEVEL)
            * (1 + pct / 100 * rng.standard_normal(n))
        )
    elif family == "season":
        amplitude = rng.uniform(1.0, 3.0) * sigma
        profile = np.array([0.3, 0.3, 0.2, 0.2, 0.0, -1.0, -1.0]) + 0.3 * rng.standard_normal(7)
        profile -= profile.mean()
        season = amplitude * profile[(np.arange(n) + int(rng.integers(7))) % 7] / np.abs(profile).max()
        x = level + season + _levels(rng, n, changes, sigma, level) + sigma * rng.standard_normal(n)
    elif family == "heavy":
        t = rng.standard_t(3, n) / (1.4826 * 0.7649)
        x = level + _levels(rng, n, changes, sigma, level) + sigma * t
        for i in rng.choice(np.arange(n), size=max(1, n // 150), replace=False):
            if min((abs(i - c) for c in changes), default=99) > MARGIN:
                x[i] += rng.choice([-1.0, 1.0]) * 6 * sigma
    elif family == "missing":
        x = level + _levels(rng, n, changes, sigma, level) + sigma * _ar(rng, n, 0.3)
        gone = rng.random(n) < rng.uniform(0.05, 0.15)
        gone[changes] = False  # the labelled first point of each new level stays present
        x[gone] = np.nan
    else:  # short
        phi = float(rng.choice([0.0, 0.5]))
        tags["phi"] = phi
        x = level + _levels(rng, n, changes, sigma, level) + sigma * _ar(rng, n, phi)
    return Case(x, changes, family, tags)


def realistic_set(seed: int, per_family: int = 30) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [make_case(rng, family) for family in FAMILIES for _ in range(per_family)]


# --- Scores (van den Burg & Williams 2020) ------------------------------------------------------


def true_positives(truth: list[int], found: list[int], margin: int = MARGIN) -> int:
    """Each true point matched to the closest unused prediction within ``margin``."""
    used: set[int] = set()
    hits = 0
    for t in truth:
        near = [f for f in found if f not in used and abs(f - t) <= margin]
        if near:
            used.add(min(near, key=lambda f: (abs(f - t), f)))
            hits += 1
    return hits


def f1_score(truth: list[int], found: list[int], margin: int = MARGIN) -> float:
    t = sorted({0, *truth})
    f = sorted({0, *found})
    tp = true_positives(t, f, margin)
    precision, recall = tp / len(f), tp / len(t)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def cover_score(n: int, truth: list[int], found: list[int]) -> float:
    def parts(cps: list[int]) -> list[tuple[int, int]]:
        b = [0, *sorted({c for c in cps if 0 < c < n}), n]
        return list(zip(b[:-1], b[1:], strict=True))

    predicted = parts(found)
    total = 0.0
    for a, b in parts(truth):
        best = 0.0
        for c, d in predicted:
            inter = min(b, d) - max(a, c)
            if inter > 0:
                best = max(best, inter / (max(b, d) - min(a, c)))
        total += (b - a) * best
    return total / n


def score(cases: list[Case], method: Callable[[np.ndarray], list[int]]) -> dict[str, float]:
    f1s, covers, found = [], [], 0
    for case in cases:
        cps = method(case.values)
        found += len(cps)
        f1s.append(f1_score(case.changes, cps))
        covers.append(cover_score(len(case.values), case.changes, cps))
    return {"f1": float(np.mean(f1s)), "cover": float(np.mean(covers)), "found": found}


# --- References ---------------------------------------------------------------------------------


def _finite(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.flatnonzero(np.isfinite(x))
    return keep, x[keep]


def bic_penalty(y: np.ndarray) -> float:
    d = np.diff(y)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    return 2.0 * max(sigma, 1e-12) ** 2 * math.log(len(y))


def _l2(csum: np.ndarray, csum2: np.ndarray, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    n = np.asarray(b - a, dtype=float)
    s = csum[b] - csum[a]
    return csum2[b] - csum2[a] - s * s / n


def binseg_l2(y: np.ndarray, pen: float, min_size: int = 2) -> list[int]:
    """Binary segmentation of means: split while the best split's cost drop exceeds ``pen``."""
    centred = y - np.mean(y)
    csum = np.concatenate([[0.0], np.cumsum(centred)])
    csum2 = np.concatenate([[0.0], np.cumsum(centred**2)])
    out: list[int] = []
    stack = [(0, len(y))]
    while stack:
        a, b = stack.pop()
        if b - a < 2 * min_size:
            continue
        t = np.arange(a + min_size, b - min_size + 1)
        gain = _l2(csum, csum2, a, b) - _l2(csum, csum2, a, t) - _l2(csum, csum2, t, b)
        i = int(np.argmax(gain))
        if gain[i] > pen:
            out.append(int(t[i]))
            stack.extend([(a, int(t[i])), (int(t[i]), b)])
    return sorted(out)


def pelt_l2(y: np.ndarray, pen: float, min_size: int = 2) -> list[int]:
    """PELT (Killick et al. 2012) of means: the exact penalised optimum, pruned."""
    n = len(y)
    centred = y - np.mean(y)
    csum = np.concatenate([[0.0], np.cumsum(centred)])
    csum2 = np.concatenate([[0.0], np.cumsum(centred**2)])
    best = np.full(n + 1, np.inf)
    best[0] = -pen
    prev = np.zeros(n + 1, dtype=int)
    alive = np.array([0])
    for t in range(min_size, n + 1):
        ok = alive[t - alive >= min_size]
        if len(ok) == 0:
            continue
        total = best[ok] + _l2(csum, csum2, ok, t) + pen
        i = int(np.argmin(total))
        best[t], prev[t] = total[i], int(ok[i])
        # Prune the starts that can never be optimal again (Killick's condition, K = 0).
        keep = best[alive] + _l2(csum, csum2, alive, t) <= best[t] + 1e-9
        keep |= t - alive < min_size
        alive = np.append(alive[keep], t - min_size + 1) if t - min_size + 1 > 0 else alive[keep]
    out = []
    t = n
    while t > 0:
        t = int(prev[t])
        if t > 0:
            out.append(t)
    return sorted(out)


def reference(kind: str) -> Callable[[np.ndarray], list[int]]:
    algo = binseg_l2 if kind == "binseg" else pelt_l2

    def run(x: np.ndarray) -> list[int]:
        keep, y = _finite(x)
        if len(y) < 4:
            return []
        return [int(keep[t]) for t in algo(y, bic_penalty(y))]

    return run


def ruptures_check(cases: list[Case], limit: int = 30) -> str:
    """Whether the numpy references equal ruptures' on the shortest series (a sentence)."""
    try:
        import ruptures as rpt  # noqa: PLC0415 - optional, development only
    except ImportError:
        return "ruptures not installed (pip install ruptures): references not cross-checked"
    same = total = 0
    for case in sorted(cases, key=lambda c: len(c.values))[:limit]:
        keep, y = _finite(case.values)
        if len(y) < 8:
            continue
        pen = bic_penalty(y)
        for mine, theirs in (
            (binseg_l2(y, pen), rpt.Binseg(model="l2", min_size=2, jump=1).fit(y).predict(pen=pen)[:-1]),
            (pelt_l2(y, pen), rpt.Pelt(model="l2", min_size=2, jump=1).fit(y).predict(pen=pen)[:-1]),
        ):
            total += 1
            same += mine == [int(t) for t in theirs]
    return f"numpy references equal ruptures {rpt.__version__} on {same}/{total} runs (the {limit} shortest series)"
