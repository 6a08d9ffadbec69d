"""Production-signal rules: pure functions on plain numbers, no ORM (the beat task feeds them).

Each rule looks at the last window of one entity (a served model on a host, or one GPU) and says
whether a condition holds, since when, with the figures that explain it. A rule fires only on
sustained evidence, never on one interval:

1. ``slo_breach``: p99 latency above the model's SLO in at least half of the window's
   intervals, and in the newest one (a breach that already ended does not open an alert).
2. ``decode_speed_drop``: tokens per second of one stream (1000 / inter-token p50, ms) down by at
   least ``min_drop`` against the reference window's median. Per-stream speed does not fall when
   traffic falls, unlike total tokens/s, so quiet hours do not alert.
3. ``throughput_floor``: total generated tokens/s under the model's floor in every interval
   of the window that had traffic (a floor set in the SLO; intervals without requests are not
   evidence).
4. ``energy_per_token_rise``: joules per generated token over the window against the
   reference window, up by at least ``min_rise``; needs ``min_tokens`` in both.
5. ``sustained``: the trailing run of consecutive buckets where a condition holds, if at least
   ``min_buckets`` long: memory above 95% of the GPU's total, and thermal/power throttling in at
   least half of a minute's samples, both for ``min_buckets`` minutes.
6. ``counter_increase``: an error counter (ECC, XID) higher at the end of the window than its
   value before it; a counter that went down (driver reload) restarts and is not an increase.

Known limits: rules see rollups, so conditions shorter than one bucket (a minute) are invisible;
the reference for drops and rises is the previous window of the same entity, so a degradation
that creeps in slower than the reference window is not seen by 2 and 4.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

MEMORY_FRACTION = 0.95
THROTTLE_FRACTION = 0.5
DEFAULT_MIN_BUCKETS = 5
DEFAULT_MIN_DROP = 0.20
DEFAULT_MIN_RISE = 0.20


@dataclass(frozen=True)
class Finding:
    """One condition that holds: its figure, the threshold it crossed, since when, and why."""

    since: datetime
    value: float
    threshold: float
    reason: str
    detail: dict[str, float | int | str] = field(default_factory=dict)


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
    )


def decode_speed_drop(
    recent_itl_p50_ms: Sequence[float | None],
    reference_itl_p50_ms: Sequence[float | None],
    *,
    since: datetime,
    min_drop: float = DEFAULT_MIN_DROP,
    min_intervals: int = 3,
) -> Finding | None:
    """Per-stream tokens/s (1000 / ITL p50) now vs the reference window. See (2.)."""
    recent = [1000.0 / v for v in recent_itl_p50_ms if v]
    reference = [1000.0 / v for v in reference_itl_p50_ms if v]
    if len(recent) < min_intervals or len(reference) < min_intervals:
        return None
    now, before = statistics.median(recent), statistics.median(reference)
    drop = 1.0 - now / before
    if drop < min_drop - 1e-9:  # "at least": 40 vs 50 tok/s is a 20% drop despite rounding
        return None
    return Finding(
        since=since,
        value=now,
        threshold=before * (1 - min_drop),
        reason=f"decode speed {now:.1f} tok/s per stream, {drop:.0%} below the reference {before:.1f} tok/s",
        detail={"reference_tokens_per_s": before, "drop": drop},
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
    )


def energy_per_token_rise(
    *,
    recent_j: float,
    recent_tokens: int,
    reference_j: float,
    reference_tokens: int,
    since: datetime,
    min_rise: float = DEFAULT_MIN_RISE,
    min_tokens: int = 10_000,
) -> Finding | None:
    """J per generated token now vs the reference window. See (4.)."""
    if recent_tokens < min_tokens or reference_tokens < min_tokens or reference_j <= 0 or recent_j <= 0:
        return None
    now, before = recent_j / recent_tokens, reference_j / reference_tokens
    rise = now / before - 1.0
    if rise < min_rise - 1e-9:
        return None
    return Finding(
        since=since,
        value=now,
        threshold=before * (1 + min_rise),
        reason=f"{now:.4f} J/token, {rise:.0%} above the reference {before:.4f} J/token",
        detail={"reference_j_per_token": before, "rise": rise},
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
