"""How bad a benchmark change is: one pure rule from its effect size and what the metric means.

1. Effect size is the relative change over the minimum effect in force for the series (the
   threshold the detector already required the change to pass, tuned per metric and team to sit
   above its noise): a change of 3x the threshold is a "3x" effect, whatever the metric's unit.
2. What the metric means: latency, throughput, accuracy, cost and time to result are what users
   and budgets feel ("user-facing"); power, energy, memory, temperature and utilisation explain a
   change but are not felt by themselves ("secondary") and rank one step lower.
3. The rule (``SEVERITY_DEFINITION`` says it in words, where severity is shown):
   - an improvement is Info;
   - a user-facing regression is Critical from ``CRITICAL_MULTIPLE`` times the threshold, else
     Warning;
   - a secondary regression is Warning from ``CRITICAL_MULTIPLE`` times the threshold, else Info.
4. A change that moved several metrics is one alert; its severity is its worst metric's
   (``worst``), and that metric is the alert's headline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CRITICAL = "critical"
WARNING = "warning"
INFO = "info"
RANK = {CRITICAL: 0, WARNING: 1, INFO: 2}

USER_FACING = "user-facing"
SECONDARY = "secondary"

# An effect this many times the minimum effect is a large one (5x the 2% default: 10%).
CRITICAL_MULTIPLE = 5.0

# Metric name prefixes (after an optional "accuracy_"/"cost_" family) that are secondary.
_SECONDARY_PREFIXES = (
    "power",
    "energy",
    "memory",
    "temperature",
    "temp_",
    "util",
    "sm_",
    "clock",
    "fan",
)

SEVERITY_DEFINITION = (
    "Severity ranks a change by its size against the detection threshold and by what the metric "
    "means to users. Regressions of user-facing metrics (latency, throughput, accuracy, cost) are "
    f"Critical from {CRITICAL_MULTIPLE:g}× the threshold and Warning below; secondary metrics "
    f"(power, energy, memory, temperature, utilisation) rank one step lower (Warning from "
    f"{CRITICAL_MULTIPLE:g}×, else Info). Improvements are Info. A change that moved several "
    "metrics of one configuration is one alert, as severe as its worst metric."
)
# The production and drift rules rank by what broke (``production_services``, ``drift.services``).
SIGNAL_SEVERITY_DEFINITION = (
    "Production and drift alerts: Critical for a p99 latency SLO breach, new XID/ECC errors or "
    "accuracy past its budget; Warning for a throughput drop, energy per token rise, memory "
    "pressure, throttling or a drift heading for its budget."
)


def metric_role(metric: str) -> str:
    """``USER_FACING`` or ``SECONDARY`` for a canonical metric name (unknown names: user-facing,
    so that a metric nobody classified is never quietly ranked down)."""
    name = metric.lower()
    return SECONDARY if name.startswith(_SECONDARY_PREFIXES) else USER_FACING


def effect_multiple(*, pct_change: float | None, min_effect: float | None) -> float | None:
    """The change as a multiple of the threshold: -12% against 2% is 6.0 (None if unknown)."""
    if pct_change is None or not min_effect or min_effect <= 0:
        return None
    return abs(pct_change) / 100.0 / min_effect


def severity_for(*, regression: bool, metric: str, pct_change: float | None, min_effect: float | None) -> str:
    """The severity of one metric's change (see the module docstring for the rule)."""
    if not regression:
        return INFO
    multiple = effect_multiple(pct_change=pct_change, min_effect=min_effect)
    large = multiple is not None and multiple >= CRITICAL_MULTIPLE
    if metric_role(metric) == USER_FACING:
        return CRITICAL if large else WARNING
    return WARNING if large else INFO


@dataclass(frozen=True)
class MetricEffect:
    """One metric of a change, as the headline choice needs it."""

    key: int  # the series id (ties broken by it, so the choice is stable)
    metric: str
    severity: str
    pct_change: float | None
    min_effect: float | None


def headline_order(effect: MetricEffect) -> tuple[int, int, float, int]:
    """Sort key, the headline first: worst severity, user-facing, largest effect multiple."""
    multiple = effect_multiple(pct_change=effect.pct_change, min_effect=effect.min_effect) or 0.0
    user = 0 if metric_role(effect.metric) == USER_FACING else 1
    return (RANK.get(effect.severity, 9), user, -multiple, effect.key)


def worst(effects: Iterable[MetricEffect]) -> MetricEffect | None:
    """The headline metric of a change: the one ``headline_order`` puts first."""
    return min(effects, key=headline_order, default=None)
