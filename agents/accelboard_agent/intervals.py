"""Attribution intervals: who held a GPU (or MIG instance) from when to when, built from
observations (docs/attribution.md, "Wire format").

1. An observation at time ``t`` lists a device's holders (``Holding``: a workload, its share of
   the device, the basis of that share, its memory and measured SM utilisation) and holds until
   the next observation.
2. A device's consecutive observations with the same holders (the same workloads on the same
   basis) make one open *segment*; its values are integrated over time, so a coalesced
   interval's ``share`` and ``sm_util`` are their time averages (a measured share moves every
   tick; the set of holders does not) and ``memory_bytes`` the largest it held for a while.
3. When the holders change at ``t`` the segment closes at ``t`` into one interval per holder,
   all with the same ``[start, end)``: so the shares held at any instant add up to what each
   observation said, at most 1. A device nobody holds has no segment (idle).
4. A batch boundary at ``t`` (the time of the last sample sealed into a batch) cuts an open
   segment that has run long enough (``spool``): ``[start, t)`` rides in that batch, ``[t, ...)`` stays open for the next; nothing
   lost, nothing twice.
5. Shares are rounded *down* to 1e-6, so rounding never lifts a device's sum above 1; a share
   that rounds to 0 is left out.

Segments are plain JSON-able dicts, so the spool keeps them between ticks and across restarts.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

EXCLUSIVE = "exclusive"
MEASURED = "measured"
EVEN = "even"
MAX_PER_BATCH = 10_000


@dataclass
class Holding:
    """One workload on one device at one observation."""

    workload: dict[str, Any]
    share: float
    basis: str
    memory_bytes: int | None = None
    sm_util: float | None = None
    key: str = field(default="")

    def __post_init__(self) -> None:
        if not self.key:
            self.key = workload_key(self.workload)


def workload_key(workload: dict[str, Any]) -> str:
    return f"{workload.get('kind', '')}|{workload.get('uid', '')}|{workload.get('container', '')}"


def _identity(basis: str, keys: list[str]) -> str:
    return basis + "#" + "#".join(sorted(keys))


def segment_open(gpu: str, at: float, holdings: list[Holding]) -> dict[str, Any]:
    basis = holdings[0].basis
    return {
        "gpu": gpu,
        "start": at,
        "last": at,
        "identity": _identity(basis, [h.key for h in holdings]),
        "basis": basis,
        "holders": [
            {
                "workload": h.workload,
                "share": h.share,
                "sm_util": h.sm_util,
                "memory_bytes": h.memory_bytes,
                "share_s": 0.0,
                "util_s": 0.0 if h.sm_util is not None else None,
                "memory_max": None,
            }
            for h in sorted(holdings, key=lambda h: h.key)
        ],
    }


def _advance(segment: dict[str, Any], at: float) -> None:
    """Integrate the current values from the last observation up to ``at``."""
    elapsed = max(0.0, at - float(segment["last"]))
    for holder in segment["holders"]:
        holder["share_s"] += holder["share"] * elapsed
        if elapsed > 0 and holder["memory_bytes"] is not None:
            holder["memory_max"] = max(holder["memory_max"] or 0, holder["memory_bytes"])
        if holder["util_s"] is not None and holder["sm_util"] is not None:
            holder["util_s"] += holder["sm_util"] * elapsed
        else:
            holder["util_s"] = None
    segment["last"] = max(float(segment["last"]), at)


def segment_close(segment: dict[str, Any], end: float) -> list[dict[str, Any]]:
    """The wire intervals of ``segment`` ended at ``end`` (none when it has no duration)."""
    segment = copy.deepcopy(segment)
    _advance(segment, end)
    start = float(segment["start"])
    duration = end - start
    if duration <= 0:
        return []
    intervals = []
    for holder in segment["holders"]:
        share = math.floor(holder["share_s"] / duration * 1e6 + 1e-9) / 1e6
        if share <= 0:
            continue
        interval: dict[str, Any] = {
            "gpu": segment["gpu"],
            "start": round(start, 3),
            "end": round(end, 3),
            "workload": holder["workload"],
            "share": min(share, 1.0),
            "basis": segment["basis"],
        }
        if holder["memory_max"] is not None:
            interval["memory_bytes"] = int(holder["memory_max"])
        if holder["util_s"] is not None:
            interval["sm_util"] = round(holder["util_s"] / duration, 1)
        intervals.append(interval)
    return intervals


def segment_observe(
    segment: dict[str, Any] | None, *, gpu: str, at: float, holdings: list[Holding]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Fold one observation into a device's open segment: (intervals closed, the open segment)."""
    if segment is not None:
        # An observation read while a batch cut the segment (another thread) counts from the cut.
        at = max(at, float(segment["last"]))
    if holdings and segment is not None:
        if segment["identity"] == _identity(holdings[0].basis, [h.key for h in holdings]):
            _advance(segment, at)
            current = {h.key: h for h in holdings}
            for holder in segment["holders"]:
                now = current[workload_key(holder["workload"])]
                # The latest word on the workload: its labels and names as last read (a pod
                # first seen before the kubelet answered gets them on a later observation).
                holder["workload"] = now.workload
                holder["share"] = now.share
                holder["sm_util"] = now.sm_util
                holder["memory_bytes"] = now.memory_bytes
            return [], segment
    closed = segment_close(segment, at) if segment is not None else []
    return closed, (segment_open(gpu, at, holdings) if holdings else None)


def segment_cut(segment: dict[str, Any], at: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Cut an open segment at a batch boundary ``at``: ([start, at) as intervals, the rest open).

    A segment that starts at or after ``at``, or whose last observation is after it (the batch
    was capped before the newest samples), is left whole for a later batch.
    """
    if at <= float(segment["start"]) or at < float(segment["last"]):
        return [], segment
    intervals = segment_close(segment, at)
    rest = copy.deepcopy(segment)
    rest["start"] = at
    rest["last"] = at
    for holder in rest["holders"]:
        holder["share_s"] = 0.0
        holder["util_s"] = 0.0 if holder["sm_util"] is not None else None
        holder["memory_max"] = None
    return intervals, rest


def shares_split(holders: dict[str, dict[str, Any]], *, measured: bool) -> list[tuple[str, float, str]]:
    """Each holder's (key, share, basis) of one device at one observation.

    ``holders`` maps workload keys to ``{"sm_util": float | None}``. One holder: the whole device,
    ``exclusive``. Several: by measured SM utilisation when ``measured`` (every process on the
    device had a reading) and the device was busy, holders that used nothing left out; otherwise
    evenly.
    """
    if not holders:
        return []
    if len(holders) == 1:
        return [(next(iter(holders)), 1.0, EXCLUSIVE)]
    if measured:
        total = sum(h["sm_util"] or 0.0 for h in holders.values())
        if total > 0:
            return [
                (key, (h["sm_util"] or 0.0) / total, MEASURED)
                for key, h in sorted(holders.items())
                if (h["sm_util"] or 0.0) > 0
            ]
    return [(key, 1.0 / len(holders), EVEN) for key in sorted(holders)]
