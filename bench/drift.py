"""Measured behaviour and cost of the quantization drift arithmetic (``accelboard/drift/computation.py``).

Needs no database; seeded, so the same run prints the same figures (timings aside).

1. Warning time: a variant whose accuracy slides 0.02/0.05/0.10% of the reference per day from
   a 1% loss toward a 3% budget, with 0.1% evaluation noise on both sides, evaluated nightly; the
   days from the start of the slide to the first "trending" verdict, against the days until the
   true loss crosses the budget (the warning must come first).
2. False warnings: steady variants (loss 0.5% of a 1% budget, same noise) checked every night
   for a year; "trending" or "over" verdicts per 100 series-years.
3. Cost: pairing a year of nightly results from four machines (1,460 per side) with the nearest
   reference result, level, trend and verdict, against a naive nearest search (every reference
   result for every variant result) in the same process; the Pareto frontier of 10,000 points.

Ends with one line: ``warn_days_005=… cross_days_005=… false_per_100=… evaluate_ms=… naive_ms=…
ratio=… pareto_ms=…``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import quick_parse  # noqa: E402

from accelboard.drift import computation as c  # noqa: E402

T0 = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
NOISE = 0.001


def _series(
    rng: np.random.Generator, days: int, loss: float, per_day: float, start: int
) -> tuple[list[c.Result], list[c.Result]]:
    reference = [c.Result(T0 + timedelta(days=d), 0.8 * (1 + rng.normal(0, NOISE))) for d in range(days)]
    variant = []
    for d in range(days):
        true_loss = loss + per_day * max(0, d - start)
        variant.append(
            c.Result(T0 + timedelta(days=d, minutes=5), 0.8 * (1 - true_loss) * (1 + rng.normal(0, NOISE)))
        )
    return variant, reference


def _verdicts(variant: list[c.Result], reference: list[c.Result], budget: float) -> list[str]:
    out = []
    for d in range(len(variant)):
        pairs = c.drift_pairs(variant[: d + 1], reference[: d + 1], max_gap=timedelta(days=14))
        trend = c.drift_trend(pairs, budget=budget)
        out.append(c.budget_verdict(level=c.drift_level(pairs), budget=budget, trend=trend))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=20, help="sliding variants per slope (default 20)")
    parser.add_argument(
        "--steady", type=int, default=100, help="steady variants checked for a year (default 100)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed evaluations (median reported)")
    parser.add_argument(
        "--machines", type=int, default=4, help="machines of the timed series, a year each (default 4)"
    )
    args = quick_parse(parser, slides=2, steady=2, repeat=1, machines=1)
    rng = np.random.default_rng(20261130)
    start, budget, days = 20, 0.03, 120
    warn: dict[float, float] = {}
    cross: dict[float, int] = {}
    for per_day in (0.0002, 0.0005, 0.0010):
        firsts = []
        crossing = start + int(np.ceil((budget - 0.01) / per_day))
        for _ in range(args.slides):
            verdicts = _verdicts(*_series(rng, days, 0.01, per_day, start), budget)
            first = next((d for d, v in enumerate(verdicts) if v != c.WITHIN), days)
            firsts.append(first - start)
        warn[per_day], cross[per_day] = statistics.median(firsts), crossing - start
        early = sum(f < crossing - start for f in firsts)
        print(
            f"slide {per_day * 100:.2f}%/day: first warning {warn[per_day]:g} days after it starts (median of {args.slides}),"
            f" the budget is crossed after {crossing - start} days; warned in time in {early}/{args.slides}"
        )

    false = 0
    steady = args.steady
    for _ in range(steady):
        variant, reference = _series(rng, 365, 0.005, 0.0, 0)
        pairs = c.drift_pairs(variant, reference)
        for d in range(c.TREND_MIN_POINTS, 365):
            window = pairs[: d + 1]
            trend = c.drift_trend(window, budget=0.01)
            if c.budget_verdict(level=c.drift_level(window), budget=0.01, trend=trend) != c.WITHIN:
                false += 1
                break
    print(
        f"steady variants (0.5% loss, 1% budget), checked nightly for a year: {false} of {steady} ever warned"
    )

    variant, reference = [], []
    for machine in range(args.machines):
        v, r = _series(rng, 365, 0.01, 0.0, 0)
        variant += [c.Result(x.at + timedelta(minutes=machine), x.value) for x in v]
        reference += [c.Result(x.at + timedelta(minutes=machine), x.value) for x in r]
    timings, naive = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        pairs = c.drift_pairs(variant, reference)
        c.budget_verdict(level=c.drift_level(pairs), budget=0.03, trend=c.drift_trend(pairs, budget=0.03))
        timings.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for result in variant:
            min(reference, key=lambda r: (abs((r.at - result.at).total_seconds()), r.at))
        naive.append((time.perf_counter() - t0) * 1000)
    evaluate_ms, naive_ms = statistics.median(timings), statistics.median(naive)
    points = [
        (float(g), float(x))
        for g, x in zip(rng.uniform(1, 3, 10_000), rng.uniform(0, 0.05, 10_000), strict=True)
    ]
    t0 = time.perf_counter()
    frontier = c.pareto_frontier(points)
    pareto_ms = (time.perf_counter() - t0) * 1000
    print(
        f"one series, {len(variant):,} results a side: evaluate {evaluate_ms:.1f} ms, naive nearest search {naive_ms:.0f} ms"
        f" ({naive_ms / evaluate_ms:.0f}x); Pareto frontier of 10,000 points {pareto_ms:.1f} ms ({len(frontier)} on it)"
    )
    print(
        f"warn_days_002={warn[0.0002]:g} cross_days_002={cross[0.0002]} warn_days_005={warn[0.0005]:g}"
        f" cross_days_005={cross[0.0005]} warn_days_010={warn[0.0010]:g} cross_days_010={cross[0.0010]}"
        f" false_per_100={false} evaluate_ms={evaluate_ms:.1f} naive_ms={naive_ms:.0f}"
        f" ratio={naive_ms / evaluate_ms:.0f} pareto_ms={pareto_ms:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
