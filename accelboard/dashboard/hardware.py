"""Hardware comparison: pure computation on plain data (no ORM), shared by the page and its tests.

What it answers, for one model and scenario across every configuration it ran on (variant ×
accelerator type × count × batch size or concurrency):

1. **Configuration summary** (:func:`config_points_build`, in
   :mod:`accelboard.benchmarks.configurations`): each configuration's figures are the median of its
   last ``last_n`` valid runs, metric by metric, so that one noisy night does not decide a
   purchase; the runs behind each figure are kept for links.
2. **Pareto frontier** (:func:`pareto_frontier`): cost per 1M against p99 latency, both lower is
   better. A point is dominated when another is no worse on both and strictly better on one;
   equal points are both kept on the frontier.
3. **Batch-size sweep knee** (:func:`sweep_knee`): along one accelerator's points in increasing
   batch size (or concurrency), the knee is the last point before the first step where p99
   latency grows faster than throughput (relative growth, ``p99[i+1]/p99[i] - 1 >
   tput[i+1]/tput[i] - 1``): past it, each extra request in the batch costs relatively more
   waiting than it brings in work. When no step does, the knee is not reached in the measured
   range and the last point is returned with ``reached=False``.
4. **Recommendation** (:func:`recommend`): among configurations whose precision is no lower than
   the floor (by bit width: fp32 > bf16 = fp16 > fp8 = int8 > int4 = fp4) and whose p99 meets the
   target, the lowest total cost per 1M (capacity + energy); ties go to the lower p99. When none
   meets the target it names the fastest configuration and its p99 instead.

Known limits: costs in different currencies or per different units (tokens, samples) are not
compared (the recommendation keeps the basis most configurations have and counts the others); a configuration without a p99
or without a cost cannot be ranked and is counted, not guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The configuration summary (1.) is shared with the capacity plan, so it lives below both pages.
from accelboard.benchmarks.configurations import (
    LAST_N_RUNS,
    ConfigPoint,
    RunFigures,
    config_points_build,
)
from accelboard.core import numbers

__all__ = [
    "LAST_N_RUNS",
    "PRECISION_BITS",
    "ConfigPoint",
    "Knee",
    "Recommendation",
    "RunFigures",
    "Sweep",
    "config_points_build",
    "cost_basis_pick",
    "pareto_frontier",
    "precision_allowed",
    "recommend",
    "sweep_knee",
    "sweeps_build",
]

# Bits per weight, for "no lower than" precision floors.
PRECISION_BITS: dict[str, int] = {
    "fp32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}

# How many runners-up the recommendation lists.
RUNNERS_UP = 3


def pareto_frontier(*, points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, latency) pairs, both lower is better: True where the point is on the frontier.

    O(n log n): sort by cost then latency; a point is on the frontier when its latency is below
    every latency seen at a strictly lower cost, or it equals the best point exactly.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    on_frontier = [False] * len(points)
    best: tuple[float, float] | None = None  # the frontier point with the lowest latency so far
    for i in order:
        cost, latency = points[i]
        if best is None or latency < best[1] or (cost, latency) == best:
            on_frontier[i] = True
            if best is None or latency < best[1]:
                best = (cost, latency)
    return on_frontier


@dataclass(frozen=True)
class Knee:
    index: int  # into the points as given, sorted by load
    reached: bool  # False: p99 never outgrew throughput in the measured range


def sweep_knee(*, points: Sequence[tuple[float, float, float]]) -> Knee | None:
    """Knee of a sweep given as (load, throughput, p99_ms) sorted by increasing load.

    The last point before the first step where p99 grows faster than throughput (relative
    growth). None for fewer than two points or for non-positive figures (no growth rate).
    """
    if len(points) < 2:
        return None
    loads = [p[0] for p in points]
    if loads != sorted(loads):
        raise ValueError("sweep points must be sorted by load")
    if any(p[1] <= 0 or p[2] <= 0 for p in points):
        return None
    for i in range(len(points) - 1):
        throughput_growth = points[i + 1][1] / points[i][1] - 1.0
        latency_growth = points[i + 1][2] / points[i][2] - 1.0
        if latency_growth > throughput_growth:
            return Knee(index=i, reached=True)
    return Knee(index=len(points) - 1, reached=False)


@dataclass(frozen=True)
class Sweep:
    """One line of the batch-size sweep chart: one variant on one hardware, several loads."""

    label: str
    points: list[ConfigPoint]
    knee: Knee | None


def sweeps_build(*, points: Sequence[ConfigPoint]) -> list[Sweep]:
    """Configurations that differ only in batch size or concurrency, with two or more loads that
    have both throughput and p99."""
    groups: dict[tuple, list[ConfigPoint]] = {}
    for point in points:
        if point.load_value is None or point.throughput is None or point.p99_ms is None:
            continue
        key = (point.variant, point.accelerator, point.accelerator_count, point.framework)
        groups.setdefault(key, []).append(point)
    sweeps = []
    for (variant, _accel, _count, _framework), members in sorted(groups.items()):
        if len({m.load_value for m in members}) < 2:
            continue
        members.sort(key=lambda m: m.load_value or 0)
        knee = sweep_knee(
            points=[
                (float(m.load_value or 0), float(m.throughput or 0), float(m.p99_ms or 0)) for m in members
            ]
        )
        sweeps.append(Sweep(label=f"{variant} on {members[0].hardware}", points=members, knee=knee))
    return sweeps


@dataclass(frozen=True)
class Recommendation:
    """The answer to "cheapest configuration meeting a p99 target, no lower than a precision"."""

    p99_target_ms: float
    precision_floor: str | None
    best: ConfigPoint | None
    runners_up: list[ConfigPoint]
    fastest: ConfigPoint | None  # when nothing qualifies: the lowest p99 there is
    currency: str
    cost_unit: str
    considered: int
    below_floor: int  # left out for their precision
    without_p99: int
    without_cost: int
    other_currency: int
    qualifying: int = 0

    @property
    def message(self) -> str:
        floor = f" at {self.precision_floor} or better" if self.precision_floor else ""
        if self.best is not None:
            return (
                f"{self.best.label} meets p99 ≤ {self.p99_target_ms:g} ms{floor} at the lowest cost: "
                f"{numbers.sig(self.best.total_cost_per_1m, digits=4)} {self.currency} per 1M {_per(self.best)} "
                f"(p99 {numbers.sig(self.best.p99_ms, digits=4)} ms)."
            )
        if self.fastest is not None:
            return (
                f"Nothing meets {self.p99_target_ms:g} ms{floor}; the fastest is {self.fastest.label} "
                f"at {numbers.sig(self.fastest.p99_ms, digits=4)} ms."
            )
        return f"No configuration{floor} has both a p99 latency and a cost to rank."


def _per(point: ConfigPoint) -> str:
    return f"{point.cost_unit or 'unit'}s"


def cost_basis_pick(*, points: Sequence[ConfigPoint]) -> tuple[str, str]:
    """The (currency, unit) most priced configurations share; alphabetical on a tie, so that the
    answer is deterministic. Dollars per 1M tokens and euros per 1M samples do not rank together."""
    bases: dict[tuple[str, str], int] = {}
    for p in points:
        if p.total_cost_per_1m is not None and p.currency:
            bases[(p.currency, p.cost_unit)] = bases.get((p.currency, p.cost_unit), 0) + 1
    return min(bases, key=lambda b: (-bases[b], b)) if bases else ("", "")


def precision_allowed(*, precision: str, floor: str | None) -> bool:
    if not floor:
        return True
    if floor not in PRECISION_BITS:
        raise ValueError(f"unknown precision floor {floor!r}")
    return PRECISION_BITS.get(precision, 0) >= PRECISION_BITS[floor]


def recommend(
    *, points: Sequence[ConfigPoint], p99_target_ms: float, precision_floor: str | None = None
) -> Recommendation:
    """Cheapest configuration (total cost per 1M) whose p99 ≤ target and precision ≥ floor."""
    if p99_target_ms <= 0:
        raise ValueError("p99_target_ms must be positive")
    allowed = [p for p in points if precision_allowed(precision=p.precision, floor=precision_floor)]
    with_p99 = [p for p in allowed if p.p99_ms is not None]
    with_cost = [p for p in with_p99 if p.total_cost_per_1m is not None and p.currency]
    currency, cost_unit = cost_basis_pick(points=with_cost)
    ranked = [p for p in with_cost if (p.currency, p.cost_unit) == (currency, cost_unit)]
    qualifying = sorted(
        (p for p in ranked if (p.p99_ms or 0) <= p99_target_ms),
        key=lambda p: (p.total_cost_per_1m, p.p99_ms, p.label),
    )
    fastest = None
    if not qualifying and with_p99:
        fastest = min(with_p99, key=lambda p: (p.p99_ms, p.total_cost_per_1m or float("inf"), p.label))
    return Recommendation(
        p99_target_ms=p99_target_ms,
        precision_floor=precision_floor or None,
        best=qualifying[0] if qualifying else None,
        runners_up=qualifying[1 : 1 + RUNNERS_UP],
        fastest=fastest,
        currency=currency,
        cost_unit=cost_unit,
        considered=len(points),
        below_floor=len(points) - len(allowed),
        without_p99=len(allowed) - len(with_p99),
        without_cost=len(with_p99) - len(with_cost),
        other_currency=len(with_cost) - len(ranked),
        qualifying=len(qualifying),
    )
