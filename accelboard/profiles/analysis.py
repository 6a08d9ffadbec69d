"""Where the GPU time goes: the breakdown, the verdict and the comparison of profiles. Pure.

Input is a ``ProfileData`` from an importer; output is a plain, JSON-ready dict (``profile_analyse``)
that the CLI prints and the profiles service stores. Times are microseconds.

The time breakdown of one rank (a GPU timeline), over a window (the whole trace, or one step):

1. Each activity is clipped to the window and given a category (``categories.ORDER``).
2. For each category in that order, the union of the intervals of it and of the categories
   before it is measured; the category's time is what its union adds. An instant where several
   streams are busy therefore counts once, for the first active category: the categories and
   ``idle`` partition the window exactly (they add up to its span), and communication is the
   *exposed* part, not hidden behind compute.
3. Idle is the gaps of the union of every stream's activity (never wall time minus summed
   kernel time, which is wrong as soon as streams overlap). A gap whose next activity was
   launched by the CPU after the gap began is time spent **waiting on the host** (input
   pipeline, Python, launch overhead); one whose next activity was launched before is waiting on
   a dependency or a synchronisation (``idle_other``); without launch times, ``idle_unknown``.
4. Communication overlapped with compute is ``|compute ∪| + |comm ∪| − |compute ∪ comm ∪|``.

Steps: a GPU activity belongs to the ``ProfilerStep#N`` its launch fell in (its start when the
launch is unknown). Step N's window runs from the end of step N−1's last activity (the first
step: its first activity) to the end of its own last one, so that the time the GPU waits for a
step's input counts in that step and the step windows tile the timeline.

A report without a timeline (``nsys stats``) has summed durations only: categories are summed
times, and idle, overlap and steps are unknown (None), which the verdict says.

The verdict and the findings on the summary are :mod:`.verdict`'s; what each part of a profile
costs is :mod:`.cost_shares`'.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from accelboard.importers.profile_data import KERNEL, ProfileData, RankTrace

from . import categories as cats
from .verdict import SHORT_KERNEL_US, profile_findings, profile_verdict

FP32_GEMM_HINT = 0.20
TOP_KERNELS = 2000
TOP_OPS = 50
# Activities processed at once in a trace's whole-timeline breakdown: above it, in chunks (bounded
# temporaries, about 80 bytes an activity of the chunk: some 20 MB; the same figures up to the
# order of floating-point additions).
CHUNK = 1 << 18

_N = len(cats.ORDER)
_COMPUTE_LAST = cats.ORDER.index(cats.COMPUTE[-1])
_COMM = cats.ORDER.index("communication")
_LAUNCH_APIS = ("launchkernel", "launchcooperativekernel", "cuLaunchKernel".lower(), "graphlaunch")


# --- interval arithmetic ---------------------------------------------------------------------------


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merged intervals of intervals sorted by start: (starts, ends, index of each group's first)."""
    if start.size == 0:
        empty = np.empty(0)
        return empty, empty, np.empty(0, dtype=np.int64)
    reach = np.maximum.accumulate(end)
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    group_end = np.maximum.reduceat(end, first)
    return start[first], group_end, first


def _union_length(start: np.ndarray, end: np.ndarray) -> float:
    starts, ends, _ = _union(start, end)
    return float((ends - starts).sum())


def window_breakdown(
    start: np.ndarray, end: np.ndarray, prio: np.ndarray, launch: np.ndarray, lo: float, hi: float
) -> dict[str, Any]:
    """The exclusive time per category, idle (and its kinds) and overlap over [lo, hi].

    Arrays must be sorted by ``start``; ``prio`` is each activity's index in ``categories.ORDER``."""
    span = max(0.0, hi - lo)
    result: dict[str, Any] = {"span_us": span, "categories": dict.fromkeys(cats.ALL, 0.0)}
    if start.size and lo <= start[0] and end.max() <= hi and (start < hi).all() and (end > lo).all():
        if start.size > CHUNK:
            return _timeline_breakdown(start, lambda a, b: end[a:b], prio, launch, lo, hi)
        s, e, p, lau = start, end, prio, launch  # the whole timeline: no clipped copies
    else:
        keep = (end > lo) & (start < hi)
        s = np.maximum(start[keep], lo)
        e = np.minimum(end[keep], hi)
        p = prio[keep]
        lau = launch[keep]
    present = set(np.unique(p).tolist())
    covered = compute_len = through_comm = 0.0
    for index, category in enumerate(cats.ORDER):
        if index in present:
            upto = p <= index
            length = _union_length(s, e) if upto.all() else _union_length(s[upto], e[upto])
            del upto
            result["categories"][category] = max(0.0, length - covered)
            covered = length
        if index == _COMPUTE_LAST:
            compute_len = covered
        elif index == _COMM:
            through_comm = covered
    comm_len = _union_length(s[p == _COMM], e[p == _COMM]) if _COMM in present else 0.0
    result["communication_us"] = comm_len
    result["overlap_us"] = max(0.0, compute_len + comm_len - through_comm)
    result["busy_us"] = covered
    result["categories"][cats.IDLE] = max(0.0, span - covered)
    result.update(_idle_kinds(s, e, lau, lo, hi))
    return result


def _idle_kinds(s: np.ndarray, e: np.ndarray, launch: np.ndarray, lo: float, hi: float) -> dict[str, float]:
    """Split the window's idle gaps by what the GPU waited on (module docstring, point 3)."""
    out = {"idle_host_us": 0.0, "idle_other_us": 0.0, "idle_unknown_us": 0.0}
    starts, ends, first = _union(s, e)
    if starts.size == 0:
        out["idle_unknown_us"] = max(0.0, hi - lo)
        return out
    gap_start = np.concatenate(([lo], ends))
    gap_end = np.concatenate((starts, [hi]))
    length = np.maximum(gap_end - gap_start, 0.0)
    # The activity that ends a gap is the first of the next group; the trailing gap has none.
    next_launch = np.concatenate((launch[first], [np.nan]))
    unknown = np.isnan(next_launch)
    host = ~unknown & (next_launch >= gap_start)
    out["idle_host_us"] = float(length[host].sum())
    out["idle_other_us"] = float(length[~unknown & ~host].sum())
    out["idle_unknown_us"] = float(length[unknown].sum())
    return out


class _UnionCarry:
    """The union of intervals fed in chunks sorted by start: closed groups are summed, the last
    one stays open (it may merge with the next chunk's first intervals)."""

    def __init__(self) -> None:
        self.length = 0.0
        self.open: tuple[float, float] | None = None

    def feed(
        self,
        s: np.ndarray,
        e: np.ndarray,
        launch: np.ndarray | None = None,
        idle: dict[str, float] | None = None,
    ) -> None:
        if s.size == 0:
            return
        lau = launch
        if self.open is not None:
            s = np.concatenate(([self.open[0]], s))
            e = np.concatenate(([self.open[1]], e))
            if lau is not None:
                lau = np.concatenate(([np.nan], lau))
        starts, ends, first = _union(s, e)
        self.length += float((ends[:-1] - starts[:-1]).sum())
        if lau is not None and idle is not None and starts.size > 1:
            # The gaps between consecutive groups, by the launch of the next group's first activity.
            length = np.maximum(starts[1:] - ends[:-1], 0.0)
            next_launch = lau[first[1:]]
            unknown = np.isnan(next_launch)
            host = ~unknown & (next_launch >= ends[:-1])
            idle["idle_host_us"] += float(length[host].sum())
            idle["idle_other_us"] += float(length[~unknown & ~host].sum())
            idle["idle_unknown_us"] += float(length[unknown].sum())
        self.open = (float(starts[-1]), float(ends[-1]))

    def total(self) -> float:
        return self.length + (self.open[1] - self.open[0] if self.open is not None else 0.0)


def _timeline_breakdown(
    start: np.ndarray,
    end_of: Callable[[int, int], np.ndarray],
    prio: np.ndarray,
    launch: np.ndarray,
    lo: float,
    hi: float,
) -> dict[str, Any]:
    """``window_breakdown`` of a whole timeline (every activity inside [lo, hi], sorted by start)
    in chunks of ``CHUNK`` activities: the unions are carried from one chunk to the next, so the
    temporaries are bounded whatever the number of activities."""
    span = max(0.0, hi - lo)
    result: dict[str, Any] = {"span_us": span, "categories": dict.fromkeys(cats.ALL, 0.0)}
    chunks = _chunks(start.size)
    present: set[int] = set()
    for a, b in chunks:
        present.update(np.unique(prio[a:b]).tolist())
    unions = {index: _UnionCarry() for index in present}
    comm = _UnionCarry()
    every = _UnionCarry()
    idle = {"idle_host_us": 0.0, "idle_other_us": 0.0, "idle_unknown_us": 0.0}
    for a, b in chunks:
        s, e, p = start[a:b], end_of(a, b), prio[a:b]
        if a == 0:  # the gap before the first activity
            first_launch = float(launch[0])
            key = (
                "idle_unknown_us"
                if np.isnan(first_launch)
                else "idle_host_us"
                if first_launch >= lo
                else "idle_other_us"
            )
            idle[key] += max(0.0, float(s[0]) - lo)
        every.feed(s, e, launch[a:b], idle)
        for index in present:
            upto = p <= index
            unions[index].feed(s[upto], e[upto])
        if _COMM in present:
            mine = p == _COMM
            comm.feed(s[mine], e[mine])
    assert every.open is not None
    tail = max(0.0, hi - every.open[1])  # the gap after the last activity: no next launch
    idle["idle_unknown_us"] += tail
    covered = compute_len = through_comm = 0.0
    for index, category in enumerate(cats.ORDER):
        if index in present:
            length = unions[index].total()
            result["categories"][category] = max(0.0, length - covered)
            covered = length
        if index == _COMPUTE_LAST:
            compute_len = covered
        elif index == _COMM:
            through_comm = covered
    comm_len = comm.total() if _COMM in present else 0.0
    result["communication_us"] = comm_len
    result["overlap_us"] = max(0.0, compute_len + comm_len - through_comm)
    result["busy_us"] = covered
    result["categories"][cats.IDLE] = max(0.0, span - covered)
    result.update(idle)
    return result


# --- one rank -------------------------------------------------------------------------------------------


def _name_tables(trace: RankTrace) -> tuple[list[str], np.ndarray]:
    """Category name and priority index for each distinct activity name of the rank."""
    kind_of = np.full(len(trace.names), KERNEL, dtype=np.int8)
    if trace.events is not None and len(trace.events):
        events = trace.events
        for a, b in _chunks(len(events)):  # a name has one kind; no sorted copy, no 64-bit index
            kind_of[events.name[a:b]] = events.kind[a:b]
    kinds = kind_of.tolist()
    folded = trace.name_categories
    categories = [folded.get(i) or cats.kernel_category(name, kinds[i]) for i, name in enumerate(trace.names)]
    prio = np.array([cats.ORDER.index(c) for c in categories], dtype=np.int8)
    return categories, prio


def _launch_stats(trace: RankTrace) -> dict[str, Any]:
    count = total = 0.0
    for api, (calls, time_us) in trace.runtime.items():
        if any(fragment in api.lower() for fragment in _LAUNCH_APIS):
            count += calls
            total += time_us
    return {"launch_calls": int(count), "launch_us_mean": total / count if count else None}


def rank_analyse(trace: RankTrace) -> dict[str, Any]:
    """Breakdown, steps, kernels and ops of one rank (see the module docstring)."""
    categories, prio_of_name = _name_tables(trace)
    out: dict[str, Any] = {
        "rank": trace.rank,
        "file": trace.file,
        "device": trace.device,
        "timeline": trace.has_timeline,
        **_launch_stats(trace),
    }
    kernels = _kernel_rows(trace, categories)
    out["kernel_rows"] = kernels
    ops: list[dict[str, Any]] = [
        {"name": name, "count": int(c), "total_us": float(t), "mean_us": float(t) / c if c else 0.0}
        for name, (c, t) in trace.ops.items()
    ]
    out["ops"] = sorted(ops, key=lambda row: -row["total_us"])[:TOP_OPS]
    kernel_only = [row for row in kernels if row["kind"] == "kernel"]
    out["kernels"] = int(sum(row["count"] for row in kernel_only))
    out["kernel_us"] = float(sum(row["total_us"] for row in kernel_only))
    out["kernel_us_mean"] = out["kernel_us"] / out["kernels"] if out["kernels"] else None

    events = trace.events
    if events is None:
        out.update(_sums_breakdown(kernels))
        out["short_kernels"] = None
        out["short_kernel_us"] = None
        out["streams"] = None
        out["steps"] = []
        return out
    # Chunk by chunk: a mask and a copy of the short kernels' durations as long as the trace
    # would each be several times the size of the columns of a trace of tiny kernels.
    short_count, short_us = 0, 0.0
    for a, b in _chunks(len(events)):
        dur = events.dur[a:b]
        short = (events.kind[a:b] == KERNEL) & (dur < SHORT_KERNEL_US)
        short_count += int(short.sum())
        short_us += float(dur[short].sum())
    out["short_kernels"] = short_count
    out["short_kernel_us"] = short_us
    out["streams"] = _distinct(events.stream)
    if not len(events):
        out.update(_empty_breakdown())
        out["steps"] = []
        return out
    # Traces are written nearly in time order: when already sorted, no reordered copies.
    if _is_sorted(events.start):
        start, dur, launch = events.start, events.dur, events.launch
        prio = _gathered(prio_of_name, events.name)
    else:  # the sorted copy: counted against the reading's limit (``OUT_OF_ORDER_EXTRA``)
        order = _sort_order(events.start)
        start = _gathered(events.start, order)
        dur = _gathered(events.dur, order)
        prio = _gathered(prio_of_name, _gathered(events.name, order))
        launch = _permuted_launch(events.launch, order)
        del order
    lo, hi = float(start[0]), _max_end(start, dur)
    out["origin_us"] = lo
    if trace.steps or start.size <= CHUNK:
        end = start + dur
        out.update(window_breakdown(start, end, prio, launch, lo, hi))
        out["steps"] = _steps(trace, start, end, prio, launch, lo)
    else:  # no steps: the ends are made chunk by chunk, never held
        out.update(_timeline_breakdown(start, lambda a, b: start[a:b] + dur[a:b], prio, launch, lo, hi))
        out["steps"] = []
    return out


def _gathered(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]`` chunk by chunk: numpy would first copy a 32-bit index to 64 bits whole."""
    out = np.empty(index.size, dtype=table.dtype)
    for a, b in _chunks(index.size):
        out[a:b] = table[index[a:b]]
    return out


def _sort_order(values: np.ndarray) -> np.ndarray:
    """The stable sorting order of ``values``, 32-bit while it fits (numpy's argsort gives 64:
    4 bytes an activity less for as long as the order is held)."""
    order = np.argsort(values, kind="stable")
    return order.astype(np.int32) if values.size < 2**31 else order


def _permuted_launch(launch: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``launch[order]``; a trace without launch times has a read-only NaN view of no memory
    (every value the same), kept as it is rather than copied."""
    if launch.ndim == 1 and launch.strides == (0,):
        return launch
    return _gathered(launch, order)


def _chunks(size: int) -> list[tuple[int, int]]:
    return [(a, min(size, a + CHUNK)) for a in range(0, size, CHUNK)]


def _is_sorted(values: np.ndarray) -> bool:
    return all(
        bool((values[max(a - 1, 0) + 1 : b] >= values[max(a - 1, 0) : b - 1]).all())
        for a, b in _chunks(values.size)
    )


def _max_end(start: np.ndarray, dur: np.ndarray) -> float:
    return max(float((start[a:b] + dur[a:b]).max()) for a, b in _chunks(start.size))


def _distinct(values: np.ndarray) -> int:
    """The number of distinct values (streams: a few), without a sorted copy of the column."""
    seen: set[int] = set()
    for a, b in _chunks(values.size):
        seen.update(np.unique(values[a:b]).tolist())
    return len(seen)


def _empty_breakdown() -> dict[str, Any]:
    return {
        "span_us": 0.0,
        "busy_us": 0.0,
        "categories": dict.fromkeys(cats.ALL, 0.0),
        "communication_us": 0.0,
        "overlap_us": 0.0,
        "idle_host_us": 0.0,
        "idle_other_us": 0.0,
        "idle_unknown_us": 0.0,
    }


def _sums_breakdown(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Categories from summed durations (no timeline): busy is their sum, idle is unknown."""
    sums = dict.fromkeys(cats.ALL, 0.0)
    for row in kernels:
        sums[row["category"]] += row["total_us"]
    busy = sum(value for key, value in sums.items() if key != cats.IDLE)
    totals: dict[str, float | None] = {**sums, cats.IDLE: None}
    return {
        "span_us": None,
        "busy_us": busy,
        "categories": totals,
        "communication_us": totals["communication"],
        "overlap_us": None,
        "idle_host_us": None,
        "idle_other_us": None,
        "idle_unknown_us": None,
    }


def _steps(
    trace: RankTrace, start: np.ndarray, end: np.ndarray, prio: np.ndarray, launch: np.ndarray, origin: float
) -> list[dict[str, Any]]:
    if not trace.steps:
        return []
    step_start = np.array([s.start for s in trace.steps])
    step_end = np.array([s.end for s in trace.steps])
    when = np.where(np.isnan(launch), start, launch)
    index = np.searchsorted(step_start, when, side="right") - 1
    inside = (index >= 0) & (when <= step_end[np.maximum(index, 0)])
    index = np.where(inside, index, -1)
    # Per-step first start and last end in one pass each; each window then reads only the
    # activities that can reach it (sorted starts, bounded by the longest activity): linear in
    # the trace, not steps × activities.
    steps = len(trace.steps)
    mine = index >= 0
    counts = np.bincount(index[mine], minlength=steps)
    first = np.full(steps, np.inf)
    last = np.full(steps, -np.inf)
    np.minimum.at(first, index[mine], start[mine])
    np.maximum.at(last, index[mine], end[mine])
    longest = float((end - start).max()) if start.size else 0.0
    rows = []
    previous_end: float | None = None
    for k, step in enumerate(trace.steps):
        if not counts[k]:
            continue
        lo = float(first[k]) if previous_end is None else previous_end
        hi = max(float(last[k]), lo)
        previous_end = hi
        a = int(np.searchsorted(start, lo - longest, side="left"))
        b = int(np.searchsorted(start, hi, side="left"))
        row = window_breakdown(start[a:b], end[a:b], prio[a:b], launch[a:b], lo, hi)
        row["step"] = step.number
        row["start_us"] = lo - origin
        row["activities"] = int(counts[k])
        rows.append(row)
    return rows


def _kernel_rows(trace: RankTrace, categories: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if trace.sums is not None:
        for item in trace.sums:
            rows.append(
                {
                    "name": item.name,
                    "kind": cats.KINDS[item.kind],
                    "category": cats.kernel_category(item.name, item.kind),
                    "count": int(item.count),
                    "total_us": float(item.total_us),
                    "min_us": item.min_us,
                    "max_us": item.max_us,
                }
            )
    elif trace.events is not None and len(trace.events):
        # Sums per name index (bincount: no sorted copy of the activities).
        events = trace.events
        size = len(trace.names)
        # Chunk by chunk: bincount and ufunc.at copy the index column to 64 bits first.
        counts = np.zeros(size, dtype=np.int64)
        totals = np.zeros(size)
        mins = np.full(size, np.inf)
        maxs = np.full(size, -np.inf)
        kinds = np.zeros(size, dtype=np.int8)
        for a, b in _chunks(len(events)):
            name, dur = events.name[a:b], events.dur[a:b]
            counts += np.bincount(name, minlength=size)
            totals += np.bincount(name, weights=dur, minlength=size)
            np.minimum.at(mins, name, dur)
            np.maximum.at(maxs, name, dur)
            kinds[name] = events.kind[a:b]
        del name, dur
        for name_index in np.flatnonzero(counts).tolist():
            rows.append(
                {
                    "name": trace.names[name_index],
                    "kind": cats.KINDS[int(kinds[name_index])],
                    "category": categories[name_index],
                    "count": int(counts[name_index]),
                    "total_us": float(totals[name_index]),
                    "min_us": float(mins[name_index]),
                    "max_us": float(maxs[name_index]),
                }
            )
    for row in rows:
        row["mean_us"] = row["total_us"] / row["count"] if row["count"] else 0.0
        row["precision"] = (
            cats.kernel_precision(row["name"]) if row["category"] in ("gemm", "conv", "attention") else ""
        )
    rows.sort(key=lambda row: -row["total_us"])
    return rows


# --- the whole profile ----------------------------------------------------------------------------------


def profile_analyse(data: ProfileData) -> dict[str, Any]:
    """The summary of a profile: per rank and step breakdowns, top kernels and ops, precision hints,
    imbalance, and the verdict. JSON-ready."""
    ranks = [rank_analyse(trace) for trace in data.ranks]
    timeline = bool(ranks) and all(rank["timeline"] for rank in ranks)
    totals = _totals(ranks, timeline)
    unknown = sorted({group for trace in data.ranks for group in trace.meta.get("unknown_groups", ())})
    if unknown and not timeline:
        totals["unknown_groups"] = unknown
        mark_unknown_groups(totals)
    kernels = _merge_kernels(ranks)
    summary: dict[str, Any] = {
        "source_format": data.source_format,
        "files": list(data.files),
        "timeline": timeline,
        "devices": sorted({rank["device"] for rank in ranks if rank["device"]}),
        "totals": totals,
        "ranks": [{k: v for k, v in rank.items() if k not in ("kernel_rows", "ops")} for rank in ranks],
        "kernels": kernels[:TOP_KERNELS],
        "kernels_total": len(kernels),
        "ops": _merge_ops(ranks),
        "precision": _precision(kernels),
        "imbalance": _imbalance(ranks, timeline),
        "warnings": list(data.warnings),
    }
    summary["verdict"] = profile_verdict(summary)
    summary["findings"] = profile_findings(summary)
    return summary


def _totals(ranks: list[dict[str, Any]], timeline: bool) -> dict[str, Any]:
    category_sums = dict.fromkeys(cats.ALL, 0.0)
    categories: dict[str, float | None] = {}
    out: dict[str, Any] = {"ranks": len(ranks), "categories": categories}
    sums: defaultdict[str, float] = defaultdict(float)
    for rank in ranks:
        for key, value in rank["categories"].items():
            if value is not None:
                category_sums[key] += value
        for key in (
            "span_us",
            "busy_us",
            "communication_us",
            "overlap_us",
            "idle_host_us",
            "idle_other_us",
            "idle_unknown_us",
            "kernels",
            "kernel_us",
            "short_kernels",
            "short_kernel_us",
            "launch_calls",
        ):
            if rank.get(key) is not None:
                sums[key] += rank[key]
    out.update(sums)
    categories.update(category_sums)
    if not timeline:
        categories[cats.IDLE] = None
        for key in ("span_us", "overlap_us", "idle_host_us", "idle_other_us", "idle_unknown_us"):
            out[key] = None
    # Shares of the GPU time: of the span (timeline) or of the summed busy time (no timeline).
    base = out.get("span_us") if timeline else out.get("busy_us")
    out["base_us"] = base or 0.0
    out["shares"] = {
        key: (value / base if base and value is not None else None) for key, value in categories.items()
    }
    group_sums = dict.fromkeys(cats.GROUPS, 0.0)
    for key, value in categories.items():
        if value is not None:
            group_sums[cats.GROUP[key]] += value
    groups: dict[str, float | None] = dict(group_sums)
    if not timeline:
        groups["idle"] = None
    out["groups"] = groups
    out["group_shares"] = {
        key: (value / base if base and value is not None else None) for key, value in groups.items()
    }
    launch_means = [
        (rank["launch_us_mean"], rank["launch_calls"]) for rank in ranks if rank["launch_us_mean"] is not None
    ]
    calls = sum(c for _, c in launch_means)
    out["launch_us_mean"] = sum(m * c for m, c in launch_means) / calls if calls else None
    out["kernel_us_mean"] = out["kernel_us"] / out["kernels"] if out.get("kernels") else None
    out["steps"] = max((len(rank["steps"]) for rank in ranks), default=0)
    return out


def mark_unknown_groups(totals: dict[str, Any]) -> None:
    """Groups whose activities the files did not report (``totals["unknown_groups"]``, an
    ``nsys stats`` upload without its memory report) read as unknown, not as 0%. In place."""
    for group in totals.get("unknown_groups") or ():
        for key in cats.ALL:
            if cats.GROUP[key] == group:
                for table in ("categories", "shares"):
                    if key in totals.get(table, {}):
                        totals[table][key] = None
        for table in ("groups", "group_shares"):
            if group in totals.get(table, {}):
                totals[table][group] = None


def _merge_kernels(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for rank in ranks:
        for row in rank["kernel_rows"]:
            slot = merged.get(row["name"])
            if slot is None:
                merged[row["name"]] = {**row, "ranks": 1}
                continue
            slot["count"] += row["count"]
            slot["total_us"] += row["total_us"]
            slot["ranks"] += 1
            for key, pick in (("min_us", min), ("max_us", max)):
                if row[key] is not None:
                    slot[key] = row[key] if slot[key] is None else pick(slot[key], row[key])
    rows = sorted(merged.values(), key=lambda row: -row["total_us"])
    for row in rows:
        row["mean_us"] = row["total_us"] / row["count"] if row["count"] else 0.0
    return rows


def _merge_ops(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for rank in ranks:
        for row in rank["ops"]:
            merged[row["name"]][0] += row["count"]
            merged[row["name"]][1] += row["total_us"]
    rows: list[dict[str, Any]] = [
        {"name": name, "count": int(c), "total_us": t, "mean_us": t / c if c else 0.0}
        for name, (c, t) in merged.items()
    ]
    rows.sort(key=lambda row: -row["total_us"])
    return rows[:TOP_OPS]


def _precision(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """GEMM/convolution time by the precision the kernel names state, and the fp32 hint."""
    by_precision: dict[str, float] = defaultdict(float)
    matrix_us = 0.0
    for row in kernels:
        if row["category"] in ("gemm", "conv"):
            by_precision[row["precision"] or "unknown"] += row["total_us"]
            matrix_us += row["total_us"]
    fp32 = by_precision.get("fp32", 0.0)
    low = sum(by_precision.get(p, 0.0) for p in cats.LOW_PRECISION)
    share = fp32 / matrix_us if matrix_us else 0.0
    hint = ""
    if matrix_us and share >= FP32_GEMM_HINT:
        examples = [
            row["name"][:80]
            for row in kernels
            if row["category"] in ("gemm", "conv") and row["precision"] == "fp32"
        ][:3]
        also = (
            " Tensor-core fp16/bf16/fp8 kernels run in the same profile, so the model already uses them elsewhere."
            if low
            else ""
        )
        hint = (
            f"{share:.0%} of matrix-multiply and convolution time runs in fp32 kernels ({', '.join(examples)}): "
            f"on tensor-core GPUs, bf16/fp16 autocast (or TF32 for fp32 models) typically runs these several times faster.{also}"
        )
    return {
        "matrix_us": matrix_us,
        "by_precision": dict(sorted(by_precision.items(), key=lambda kv: -kv[1])),
        "fp32_share": share,
        "low_precision_us": low,
        "hint": hint,
    }


def _imbalance(ranks: list[dict[str, Any]], timeline: bool) -> dict[str, Any] | None:
    if len(ranks) < 2:
        return None

    def compute(rank: dict[str, Any]) -> float:
        return sum(rank["categories"][c] or 0.0 for c in cats.COMPUTE)

    values = {rank["rank"]: compute(rank) for rank in ranks}
    slowest = max(values, key=lambda r: values[r])
    fastest = min(values, key=lambda r: values[r])
    top = values[slowest]
    spread = (top - values[fastest]) / top if top else 0.0
    return {
        "compute_us": values,
        "slowest_rank": slowest,
        "fastest_rank": fastest,
        "spread": spread,
        "mean_us": sum(values.values()) / len(values),
    }
