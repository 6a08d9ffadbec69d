"""A series' levels and its baseline: one definition for every page and email that shows them.

Pure: plain values in, plain values out (no ORM). Used by the trends page (the baseline column,
its band and the normalised scale), the alert page's chart and the alert email's chart (the
level lines), and the run page's comparison with its series.

1. Segments. A series is cut at its boundaries: the change points the detector found
   (``detection.segment``), the first bad run of each change alert, the run where an alert's
   values went back (``reverted_at_run``) and the changes people marked expected. A detector
   change point within ``SAME_CHANGE`` results of an alert's or a person's boundary is the same
   change found again (the offline search relocates it by a few results) and is not a boundary
   of its own. Each segment's level is the median of its results (what ``segment`` reports for a
   flat segment), its spread 1.4826 × MAD; a line drawn for it spans its first to its last result.
2. The baseline (``baseline_resolve``) is the level the series is judged against:
   a. the segment before the earliest *held* change: an open or acknowledged regression alert
      whose first bad run comes after the last expected change. Until a person accepts the new
      level (marks it expected) or the alert is resolved, the regressed results are the
      "current level", never the baseline; two or twenty regressed runs change nothing.
   b. otherwise the current (last) segment, which starts at the later of the last change point
      and the last expected change.
3. The current level is the last segment; while a change is held it is shown beside the
   baseline with its change against it.

Known limits: an alert's chart sees a window of the series, so its segments' levels are medians
of the results on the chart; a held change whose first bad run is the series' first result has
no level before it, and the baseline is then the current segment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .baseline import robust_sigma

# A detector change point this close (in results) to an alert's or a person's boundary is that
# change: ``segment`` re-locates a change by up to its minimum segment size (5) and the online
# check's change index can differ from it by a few results.
SAME_CHANGE = 3


@dataclass(frozen=True)
class Segment:
    """Results ``start`` to ``end`` (indices, both included) at one level."""

    start: int
    end: int
    level: float
    spread: float

    @property
    def count(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class BaselineView:
    """The baseline, the current level and, while a change is held, the index of its first bad
    result (``held_at``); ``segments`` are all of the series' segments, oldest first."""

    baseline: Segment
    current: Segment
    segments: tuple[Segment, ...]
    held_at: int | None = None

    @property
    def held(self) -> bool:
        return self.held_at is not None

    @property
    def current_pct(self) -> float | None:
        """The current level against the baseline, in %; None with a zero baseline."""
        if not self.baseline.level:
            return None
        return (self.current.level - self.baseline.level) / abs(self.baseline.level) * 100.0


def boundaries_merge(*, n: int, changes: Iterable[int], fixed: Iterable[int]) -> list[int]:
    """Sorted first indices of new segments in (0, n): every ``fixed`` one, and each detector
    ``change`` not within ``SAME_CHANGE`` results of a fixed one."""
    kept = {i for i in fixed if 0 < i < n}
    for index in changes:
        if 0 < index < n and all(abs(index - other) > SAME_CHANGE for other in kept):
            kept.add(index)
    return sorted(kept)


def segments_of(values: Sequence[float], *, boundaries: Iterable[int]) -> list[Segment]:
    """The series cut at ``boundaries`` (first index of each new segment), oldest first.

    A segment's level and spread are over its finite results; one with none is left out."""
    y = np.asarray(values, dtype=float)
    n = len(y)
    cuts = [0, *sorted({b for b in boundaries if 0 < b < n}), n]
    out: list[Segment] = []
    for start, stop in zip(cuts, cuts[1:], strict=False):
        part = y[start:stop]
        part = part[np.isfinite(part)]
        if len(part) == 0:
            continue
        out.append(
            Segment(start=start, end=stop - 1, level=float(np.median(part)), spread=robust_sigma(part))
        )
    return out


def segment_at(segments: Sequence[Segment], index: int) -> Segment | None:
    """The segment holding result ``index``."""
    return next((s for s in segments if s.start <= index <= s.end), None)


def baseline_resolve(
    *,
    values: Sequence[float],
    changes: Iterable[int] = (),
    resets: Iterable[int] = (),
    holds: Iterable[int] = (),
    ends: Iterable[int] = (),
) -> BaselineView | None:
    """The series' baseline and current level (see the module docstring, 2. and 3.).

    ``changes``: the detector's change points (first index of each new level). ``resets``:
    first results after a change people marked expected. ``holds``: first bad results of the
    open or acknowledged regression alerts. ``ends``: other alert boundaries (first bad results of
    other change alerts, results where an alert's values went back). None for an empty series.
    """
    resets, holds = list(resets), list(holds)
    segments = segments_of(
        values, boundaries=boundaries_merge(n=len(values), changes=changes, fixed=[*resets, *holds, *ends])
    )
    if not segments:
        return None
    current = segments[-1]
    last_reset = max((r for r in resets if 0 < r < len(values)), default=0)
    held = sorted(h for h in holds if last_reset < h < len(values))
    if held:
        before = segment_at(segments, held[0] - 1)
        if before is not None:
            return BaselineView(baseline=before, current=current, segments=tuple(segments), held_at=held[0])
    return BaselineView(baseline=current, current=current, segments=tuple(segments))


def change_levels(
    *, values: Sequence[float], first: int, changes: Iterable[int] = (), fixed: Iterable[int] = ()
) -> tuple[Segment | None, Segment | None]:
    """The segments either side of the change whose first bad result is ``first``: the level
    before it (None when ``first`` is the first result) and after it, each over its own results
    only. ``changes``: the detector's other change points; ``fixed``: the other alert and
    expected-change boundaries."""
    segments = segments_of(
        values, boundaries=boundaries_merge(n=len(values), changes=changes, fixed=[first, *fixed])
    )
    return (segment_at(segments, first - 1) if first > 0 else None), segment_at(segments, first)
