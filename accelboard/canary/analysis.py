"""Canary analysis: is the canary deployment worse than the baseline on the same traffic?

Pure computation on plain lists of per-interval values (no Django), in the manner of Kayenta:

1. Each metric's per-interval values of the baseline and of the canary over the same window are
   compared with the **Mann-Whitney U test** (two-sided, normal approximation with the tie
   correction and a continuity correction: scipy's ``asymptotic`` method). It asks whether one
   deployment's values tend to be larger, without assuming a distribution.
2. The **effect** is the Hodges-Lehmann shift (the median of every canary - baseline difference),
   made relative to the baseline's median for the metrics whose minimum effect is relative
   (latency, throughput, energy, cost) and kept absolute for rates (error rate, agreement), then
   signed so that a positive ``worse_by`` means the canary is worse in the metric's direction.
3. Per metric: **too little data yet** while either side has fewer than ``min_count`` values;
   **fail** when the difference is significant (p < alpha) and the canary is worse by at least the
   minimum effect; **marginal** when significant and worse by at least half of it; else **pass**
   (a significant improvement passes; so does a significant change smaller than half the minimum
   effect: a real but harmless difference).
4. Overall: **fail** if any metric fails, else **marginal** if any is marginal, else **pass**;
   **too little data yet** while any gating metric with values on either side lacks
   ``min_count`` on both (agreement, daily, does not gate: it shows its own "too little data"). A metric neither deployment reports (agreement without drift data, energy without
   telemetry) is left out.

False alarms: a metric only fails when the canary is worse (one tail of a two-sided test), so on
identical deployments each metric fails with probability at most alpha / 2, and the overall verdict
with at most ``len(metrics) * alpha / 2`` (union bound; the minimum effect makes it far smaller).
Known limits: per-interval values are treated as independent (autocorrelated traffic makes the
test more eager; the minimum effect guards against that); agreement is daily, so it needs days.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

PASS = "pass"
MARGINAL = "marginal"
FAIL = "fail"
NO_DATA = "no-data"
LOWER, HIGHER = "lower", "higher"  # which way is better

ALPHA = 0.005
MIN_COUNT = 10
# Hodges-Lehmann over n x m differences; above this many per side the values are thinned evenly.
HL_MAX_PER_SIDE = 2000


@dataclass(frozen=True)
class MetricSpec:
    key: str
    label: str
    unit: str
    better: str  # LOWER or HIGHER
    min_effect: float  # relative (0.05 = 5%) when ``relative``, else in the metric's unit
    relative: bool = True
    min_count: int = MIN_COUNT
    # Whether the overall verdict waits for it: daily agreement would hold an hour's canary for days.
    gating: bool = True


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ttft_p50_ms", "TTFT p50", "ms", LOWER, 0.10),
    MetricSpec("ttft_p99_ms", "TTFT p99", "ms", LOWER, 0.15),
    MetricSpec("tpot_p50_ms", "TPOT p50", "ms", LOWER, 0.10),
    MetricSpec("tpot_p99_ms", "TPOT p99", "ms", LOWER, 0.15),
    MetricSpec("e2e_p50_ms", "End-to-end p50", "ms", LOWER, 0.10),
    MetricSpec("e2e_p99_ms", "End-to-end p99", "ms", LOWER, 0.15),
    MetricSpec("error_rate", "Error rate", "", LOWER, 0.005, relative=False),
    MetricSpec("tokens_per_s_per_gpu", "Tokens/s per GPU", "tok/s", HIGHER, 0.05),
    MetricSpec("j_per_1m_tokens", "Energy per 1M tokens", "J", LOWER, 0.05),
    MetricSpec("cost_per_1m_tokens", "Cost per 1M tokens", "", LOWER, 0.05),
    MetricSpec(
        "agreement_rate",
        "Agreement with reference",
        "",
        HIGHER,
        0.01,
        relative=False,
        min_count=3,
        gating=False,
    ),
)
METRIC_KEYS = tuple(m.key for m in METRICS)


@dataclass(frozen=True)
class RankTest:
    u: float  # the canary's U statistic
    z: float
    p_value: float


def mann_whitney(baseline: Sequence[float], canary: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U, normal approximation with tie and continuity corrections.

    U is the canary's: the number of (canary, baseline) pairs where the canary is larger, ties
    counted half. All values equal: no evidence either way (z = 0, p = 1)."""
    x = np.asarray(canary, dtype=float)
    y = np.asarray(baseline, dtype=float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    ranks = stats.rankdata(np.concatenate([x, y]))
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    n = n1 + n2
    _, counts = np.unique(np.concatenate([x, y]), return_counts=True)
    tie = float((counts**3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return RankTest(u=u, z=0.0, p_value=1.0)
    mu = n1 * n2 / 2.0
    diff = u - mu
    z = (diff - math.copysign(0.5, diff)) / math.sqrt(var) if diff else 0.0
    if abs(diff) <= 0.5:
        z = 0.0
    p = float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
    return RankTest(u=u, z=z, p_value=p)


def _thin(values: np.ndarray) -> np.ndarray:
    if len(values) <= HL_MAX_PER_SIDE:
        return values
    return np.sort(values)[np.linspace(0, len(values) - 1, HL_MAX_PER_SIDE).astype(int)]


def hodges_lehmann(baseline: Sequence[float], canary: Sequence[float]) -> float:
    """The median of all canary - baseline differences: the shift that best moves one onto the other."""
    x = _thin(np.asarray(canary, dtype=float))
    y = _thin(np.asarray(baseline, dtype=float))
    return float(np.median(np.subtract.outer(x, y)))


@dataclass
class MetricResult:
    key: str
    label: str
    unit: str
    better: str
    verdict: str
    n_baseline: int
    n_canary: int
    min_count: int
    min_effect: float
    relative: bool
    baseline_median: float | None = None
    canary_median: float | None = None
    shift: float | None = None  # Hodges-Lehmann, canary - baseline, in the metric's unit
    effect: float | None = None  # the shift, relative to the baseline's median when ``relative``
    worse_by: float | None = None  # the effect signed so that positive is worse
    p_value: float | None = None
    u: float | None = None
    reason: str = ""


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def metric_compare(
    spec: MetricSpec,
    baseline: Sequence[float | None],
    canary: Sequence[float | None],
    *,
    alpha: float = ALPHA,
    min_effect: float | None = None,
) -> MetricResult:
    """One metric's verdict (module docstring, steps 1 to 3)."""
    b, c = _clean(baseline), _clean(canary)
    effect_floor = spec.min_effect if min_effect is None else min_effect
    result = MetricResult(
        key=spec.key,
        label=spec.label,
        unit=spec.unit,
        better=spec.better,
        verdict=NO_DATA,
        n_baseline=len(b),
        n_canary=len(c),
        min_count=spec.min_count,
        min_effect=effect_floor,
        relative=spec.relative,
    )
    if b:
        result.baseline_median = float(np.median(b))
    if c:
        result.canary_median = float(np.median(c))
    if len(b) < spec.min_count or len(c) < spec.min_count:
        result.reason = (
            f"too little data yet: {len(b)} baseline and {len(c)} canary values, {spec.min_count} needed"
        )
        return result
    test = mann_whitney(b, c)
    shift = hodges_lehmann(b, c)
    base = abs(result.baseline_median or 0.0)
    if spec.relative:
        effect = shift / base if base > 0 else (0.0 if shift == 0 else math.copysign(math.inf, shift))
    else:
        effect = shift
    worse_by = effect if spec.better == LOWER else -effect
    result.u, result.p_value, result.shift, result.effect, result.worse_by = (
        test.u,
        test.p_value,
        shift,
        effect,
        worse_by,
    )
    significant = test.p_value < alpha
    if significant and worse_by >= effect_floor:
        result.verdict, result.reason = FAIL, "significantly worse by at least the minimum effect"
    elif significant and worse_by >= effect_floor / 2:
        result.verdict, result.reason = MARGINAL, "significantly worse by at least half the minimum effect"
    elif significant and worse_by < 0:
        result.verdict, result.reason = PASS, "significantly better"
    elif significant:
        result.verdict, result.reason = PASS, "a significant difference below half the minimum effect"
    else:
        result.verdict, result.reason = PASS, "no significant difference"
    return result


@dataclass
class Verdict:
    verdict: str
    metrics: list[MetricResult]
    alpha: float
    rule: str = field(default="")

    @property
    def failed(self) -> list[str]:
        return [m.key for m in self.metrics if m.verdict == FAIL]

    @property
    def marginal(self) -> list[str]:
        return [m.key for m in self.metrics if m.verdict == MARGINAL]


RULE = (
    "Each metric: fail when the canary is significantly worse (Mann-Whitney U, p < {alpha}) by at least "
    "the minimum effect; marginal when significantly worse by at least half of it; else pass. Overall: "
    "fail if any metric fails, else marginal if any is marginal, else pass; too little data yet while a "
    "reported serving metric has fewer values than it needs on either side (agreement, measured daily, "
    "does not hold the verdict)."
)


def canary_verdict(
    baseline: Mapping[str, Sequence[float | None]],
    canary: Mapping[str, Sequence[float | None]],
    *,
    alpha: float = ALPHA,
    min_effects: dict[str, float] | None = None,
    metrics: Sequence[MetricSpec] = METRICS,
) -> Verdict:
    """Every metric's verdict and the overall one (module docstring, step 4)."""
    overrides = min_effects or {}
    results = []
    for spec in metrics:
        b, c = baseline.get(spec.key, ()), canary.get(spec.key, ())
        if not _clean(b) and not _clean(c):
            continue
        results.append(metric_compare(spec, b, c, alpha=alpha, min_effect=overrides.get(spec.key)))
    verdicts = {m.verdict for m in results}
    gating = {spec.key for spec in metrics if spec.gating}
    if not results or any(m.verdict == NO_DATA and m.key in gating for m in results):
        overall = NO_DATA
    elif FAIL in verdicts:
        overall = FAIL
    elif MARGINAL in verdicts:
        overall = MARGINAL
    else:
        overall = PASS
    return Verdict(verdict=overall, metrics=results, alpha=alpha, rule=RULE.format(alpha=alpha))


def false_fail_bound(*, metrics: int, alpha: float = ALPHA) -> float:
    """The most often identical deployments fail overall (union bound over one-tailed failures)."""
    return min(1.0, metrics * alpha / 2)
