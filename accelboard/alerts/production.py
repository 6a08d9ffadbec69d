"""Production-signal rules: pure functions on plain numbers, no ORM (the beat task feeds them).

Each rule looks at the last window of one entity (a served model on a host, or one GPU) and says
whether a condition holds, since when, with the figures that explain it. A rule fires only on
sustained evidence, never on one interval:

1. ``slo_breach``: p99 latency above the model's SLO in at least half of the window's
   intervals, and in the newest one (a breach that already ended does not open an alert).
2. ``decode_speed_drop``: tokens per second of one stream (1000 / inter-token p50, ms) down by at
   least ``min_drop`` against what the reference window ran at the same load (7.). Per-stream
   speed does not fall when traffic falls, unlike total tokens/s, but it does fall as traffic
   (and batch size) rises, so the daily cycle alone is not a drop.
3. ``throughput_floor``: total generated tokens/s under the model's floor in every interval
   of the window that had traffic (a floor set in the SLO; intervals without requests are not
   evidence).
4. ``energy_per_token_rise``: joules per generated token over the window against what the
   reference window spent at the same load (7.), up by at least ``min_rise``; needs
   ``min_tokens`` in both and at least ``min_intervals`` complete intervals now.
5. ``sustained``: the trailing run of consecutive buckets where a condition holds, if at least
   ``min_buckets`` long: memory above 95% of the GPU's total, and thermal/power throttling in at
   least half of a minute's samples, both for ``min_buckets`` minutes.
6. ``counter_increase``: an error counter (ECC, XID) higher at the end of the window than its
   value before it; a counter that went down (driver reload) restarts and is not an increase.

7. Windows: the caller passes complete intervals only (a partial one next to full ones is half
   the tokens for all the energy), and ``expected_at_load`` reads the reference at the recent
   load: a robust line through (load, figure) of at least ``DEFAULT_MIN_REFERENCE`` reference
   intervals, no judgement when the load now is outside what the reference saw.

Known limits: rules see rollups, so conditions shorter than one bucket (a minute) are invisible;
the reference for drops and rises is the previous window of the same entity, so a degradation
that creeps in slower than the reference window is not seen by 2 and 4.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from accelboard.core import numbers

MEMORY_FRACTION = 0.95
THROTTLE_FRACTION = 0.5
DEFAULT_MIN_BUCKETS = 5
DEFAULT_MIN_DROP = 0.20
DEFAULT_MIN_RISE = 0.20
DEFAULT_MIN_REFERENCE = 6  # complete reference intervals needed to say what a load used to cost
LOAD_MARGIN = 0.25


@dataclass(frozen=True)
class Finding:
    """One condition that holds: its figure, the threshold it crossed, since when, and why."""

    since: datetime
    value: float
    threshold: float
    reason: str
    detail: dict[str, float | int | str] = field(default_factory=dict)
    # Against the reference (or the limit where there is none), in %; None for a plain fact.
    pct_change: float | None = None
    # Share of the window's intervals (or minutes) that show the condition: how consistent the
    # evidence is (these rules are thresholds on sustained windows, not statistical tests).
    confidence: float | None = None
    summary: str = ""  # a few words for the alerts list when there is no % change


def slo_breach(
    intervals: Sequence[tuple[datetime, float | None]],
    *,
    slo_ms: float,
    min_intervals: int = 3,
    min_fraction: float = 0.5,
) -> Finding | None:
    """p99 latency (ms) per interval, oldest first, against the SLO. See the module docstring (1.)."""
    known = [(t, v) for t, v in intervals if v is not None]
    if len(known) < min_intervals:
        return None
    above = [(t, v) for t, v in known if v > slo_ms]
    if not above or known[-1][1] <= slo_ms or len(above) / len(known) < min_fraction:
        return None
    worst = statistics.median(v for _, v in above)
    return Finding(
        since=above[0][0],
        value=worst,
        threshold=slo_ms,
        reason=f"p99 above {slo_ms:g} ms in {len(above)} of {len(known)} intervals (median {worst:.1f} ms)",
        detail={"intervals_above": len(above), "intervals": len(known)},
        pct_change=(worst / slo_ms - 1) * 100,
        confidence=len(above) / len(known),
    )


def expected_at_load(
    reference: Sequence[tuple[float, float]], load: float, *, min_points: int = DEFAULT_MIN_REFERENCE
) -> float | None:
    """What a figure was at ``load`` in the reference window: (load, value) pairs. See (7.).

    A Theil-Sen line (the median of pairwise slopes, robust to a few odd intervals) through the
    reference; its median when the reference's load barely varies. None when the reference has
    fewer than ``min_points`` intervals or ``load`` lies outside its range widened by 25%: no
    comparable traffic, so no judgement.
    """
    pts = [(x, v) for x, v in reference if math.isfinite(x) and math.isfinite(v)]
    if len(pts) < min_points or not math.isfinite(load):
        return None
    xs = [x for x, _ in pts]
    lo, hi = min(xs), max(xs)
    if load < lo - LOAD_MARGIN * abs(lo) or load > hi + LOAD_MARGIN * abs(hi):
        return None
    values = [v for _, v in pts]
    if hi - lo <= 0.1 * max(abs(hi), 1e-12):
        return statistics.median(values)
    slopes = [(v2 - v1) / (x2 - x1) for i, (x1, v1) in enumerate(pts) for x2, v2 in pts[i + 1 :] if x2 != x1]
    slope = statistics.median(slopes)
    intercept = statistics.median(v - slope * x for x, v in pts)
    return intercept + slope * load


def decode_speed_drop(
    recent: Sequence[tuple[float, float | None]],
    reference: Sequence[tuple[float, float | None]],
    *,
    since: datetime,
    min_drop: float = DEFAULT_MIN_DROP,
    min_intervals: int = 3,
) -> Finding | None:
    """Per-stream tokens/s (1000 / ITL p50, ms) now vs the reference window at the same load.

    ``recent`` and ``reference``: (requests/s, ITL p50 ms) per complete interval. See (2.)."""
    now_pts = [(load, 1000.0 / itl) for load, itl in recent if itl]
    ref_pts = [(load, 1000.0 / itl) for load, itl in reference if itl]
    if len(now_pts) < min_intervals:
        return None
    now = statistics.median(v for _, v in now_pts)
    load = statistics.median(x for x, _ in now_pts)
    before = expected_at_load(ref_pts, load)
    if before is None or before <= 0:
        return None
    drop = 1.0 - now / before
    if drop < min_drop - 1e-9:  # "at least": 40 vs 50 tok/s is a 20% drop despite rounding
        return None
    return Finding(
        since=since,
        value=now,
        threshold=before * (1 - min_drop),
        reason=f"decode speed {now:.1f} tok/s per stream, {drop:.0%} below the {before:.1f} tok/s "
        f"the reference window ran at this load ({numbers.sig(load, digits=3)} requests/s)",
        detail={"reference_tokens_per_s": before, "drop": drop, "load_requests_per_s": load},
        pct_change=-drop * 100,
        confidence=sum(v <= before * (1 - min_drop) for _, v in now_pts) / len(now_pts),
    )


def throughput_floor(
    intervals: Sequence[tuple[datetime, int, int, int]],
    *,
    floor_tokens_per_s: float,
    min_intervals: int = 3,
) -> Finding | None:
    """(start, seconds, requests, generated tokens) per interval against a floor. See (3.)."""
    busy = [
        (t, tokens / seconds) for t, seconds, requests, tokens in intervals if requests > 0 and seconds > 0
    ]
    if len(busy) < min_intervals or any(rate >= floor_tokens_per_s for _, rate in busy):
        return None
    median = statistics.median(rate for _, rate in busy)
    return Finding(
        since=busy[0][0],
        value=median,
        threshold=floor_tokens_per_s,
        reason=f"{median:.0f} tokens/s, under the floor of {floor_tokens_per_s:g} in all {len(busy)} busy intervals",
        detail={"intervals": len(busy)},
        pct_change=(median / floor_tokens_per_s - 1) * 100,
        confidence=1.0,  # every busy interval was under the floor
    )


def energy_per_token_rise(
    recent: Sequence[tuple[float, int, float]],
    reference: Sequence[tuple[float, int, float]],
    *,
    since: datetime,
    min_rise: float = DEFAULT_MIN_RISE,
    min_tokens: int = 10_000,
    min_intervals: int = 3,
) -> Finding | None:
    """J per generated token now vs what the reference window spent at the same load. See (4.).

    ``recent`` and ``reference``: (seconds, generated tokens, energy J) per complete interval
    whose energy was measured over all of it. The reference gives power against tokens/s
    (a GPU draws its idle power with no traffic, so J/token falls as traffic rises); the
    expectation is that power at the recent tokens/s, over the recent tokens."""
    now_rows = [r for r in recent if r[0] > 0 and r[2] > 0]
    ref_rows = [r for r in reference if r[0] > 0 and r[2] > 0 and r[1] > 0]
    seconds = sum(r[0] for r in now_rows)
    tokens = sum(r[1] for r in now_rows)
    if len(now_rows) < min_intervals or tokens < min_tokens or sum(r[1] for r in ref_rows) < min_tokens:
        return None
    rate = tokens / seconds
    power = expected_at_load([(t / s, e / s) for s, t, e in ref_rows], rate)
    if power is None or power <= 0:
        return None
    now, before = sum(r[2] for r in now_rows) / tokens, power / rate
    rise = now / before - 1.0
    if rise < min_rise - 1e-9:
        return None
    return Finding(
        since=since,
        value=now,
        threshold=before * (1 + min_rise),
        reason=f"{numbers.sig(now, digits=3)} J/token, {rise:.0%} above the {numbers.sig(before, digits=3)} J/token "
        "the reference window "
        f"spent at this load ({rate:,.0f} tokens/s)",
        detail={"reference_j_per_token": before, "rise": rise, "load_tokens_per_s": rate},
        pct_change=rise * 100,
        confidence=sum(e / t >= before * (1 + min_rise) for _, t, e in now_rows if t) / len(now_rows),
    )


def sustained(
    buckets: Sequence[tuple[datetime, bool | None]],
    *,
    min_buckets: int = DEFAULT_MIN_BUCKETS,
) -> datetime | None:
    """Start of the trailing run of buckets where the condition holds, if ``min_buckets`` long.

    A bucket without data (None) ends the run: a gap is not evidence either way.
    """
    count = 0
    start: datetime | None = None
    for t, holds in reversed(buckets):
        if not holds:
            break
        count += 1
        start = t
    return start if count >= min_buckets else None


def memory_high(used_bytes: float | None, total_bytes: float | None) -> bool | None:
    """One bucket: memory in use above 95% of the GPU's total (None when either is unknown)."""
    if used_bytes is None or not total_bytes:
        return None
    return used_bytes / total_bytes > MEMORY_FRACTION


def throttled(throttled_samples: int, samples: int) -> bool | None:
    """One bucket: throttling in at least half of its samples (None without samples)."""
    if samples <= 0:
        return None
    return throttled_samples / samples >= THROTTLE_FRACTION


def counter_increase(before: int | None, values: Sequence[int | None]) -> int:
    """Errors counted during the window: increases of a cumulative counter, resets ignored. See (6.)."""
    total = 0
    last = before
    for value in values:
        if value is None:
            continue
        if last is not None and value > last:
            total += value - last
        last = value
    return total
