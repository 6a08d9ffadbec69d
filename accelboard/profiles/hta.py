"""Holistic Trace Analysis (HTA) style analyses of a profile, on whatever format produced it. Pure.

Input is the importers' common ``ProfileData`` (Kineto, nsys SQLite, ...) and the summary that
:mod:`.analysis` made of it; output is a JSON-ready dict stored with the profile. Times are
microseconds. A format without a timeline (``nsys stats`` CSV) or without launch calls gives None
for what it cannot tell, never 0.

1. **Idle time by stream**, as HTA's ``get_idle_time_breakdown``: on each stream, activities in start
   order; the gap before an activity (its start minus the end of the stream's previous activity,
   clipped at 0) is

   - *host wait* when the CPU called its launch (``cudaLaunchKernel``, ``cudaMemcpyAsync`` ...,
     linked by correlation id) after the previous activity had ended: the GPU had nothing queued;
   - *kernel wait* otherwise when the gap is shorter than ``KERNEL_WAIT_US`` (HTA's
     ``consecutive_kernel_delay``: 30 in the trace's unit, µs for Kineto, although its docs say
     ns; so that the figures match what HTA computes): the overhead of starting back-to-back kernels;
   - *other* otherwise: the activity was queued before the gap began and still started late, so
     it waited on something on the GPU: another stream's kernel (an event, a cross-stream
     dependency or synchronisation) or a launch delay. ``cross_stream_us`` is the part of *other*
     during which another stream of the same rank was running: waiting on another kernel;
   - *unknown* when the launch time is unknown and the gap is not short (HTA would say *other*).

   The gaps are per stream, so with several streams they add up to more than the device's idle
   time (the breakdown's ``idle``, gaps when no stream runs): both are shown, each named.
2. **Kernel launch statistics**, as HTA's ``get_cuda_kernel_launch_stats``: for each kernel whose
   launch call is known, the launch delay is the kernel's GPU start minus the end of the CPU's
   launch call, negative values (clock skew) counted as 0 as HTA does (p50, p95, max); a *short
   kernel* runs for less time than its launch call took. Kernels of a CUDA graph share one
   ``cudaGraphLaunch`` and have no launch call of their own (the importer leaves it unknown).
   HTA's default also counts memcpy/memset launches; these figures are kernels only.
3. **Steps**: per ``ProfilerStep#N``, the GPU window of the step (:mod:`.analysis`) as busy and
   idle time, and the CPU's step duration; the step time's median, p95 and the slowest step.
4. **Ranks** (several ranks of one step uploaded together): per rank the compute, exposed
   communication and idle time; per step the imbalance ``(max - min) / max`` of compute time and
   the slowest rank. Collectives (NCCL ``ncclDevKernel_*``, older ``ncclKernel_*``, RCCL ...) are
   matched across ranks by order; the rank whose kernel of a collective starts last is the one
   the others waited for (HTA's straggler by late-starting communication kernels). The straggler
   is the rank last at most collectives, else the one with the most compute time. Ranks' clocks
   are compared as the traces give them (one host: one clock).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelboard.importers.profile_data import KERNEL, GpuEvents, ProfileData, RankTrace

from . import categories as cats
from .analysis import profile_analyse
from .verdict import TENSOR_BUSY_PCT, counters_bound

KERNEL_WAIT_US = 30.0  # HTA's default consecutive_kernel_delay, compared in the trace's µs
IDLE_KINDS = ("host_wait_us", "kernel_wait_us", "other_us", "unknown_us")


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return {"p50": None, "p95": None, "max": None, "mean": None}
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50": float(p50), "p95": float(p95), "max": float(values.max()), "mean": float(values.mean())}


# --- 1. idle time by stream -------------------------------------------------------------------------


# Activities per piece in the analyses below: their temporaries (a few arrays of 8 bytes an
# activity) stay a few MB whatever the length of the trace.
PIECE = 1 << 18


def _pieces(size: int) -> list[tuple[int, int]]:
    return [(a, min(size, a + PIECE)) for a in range(0, size, PIECE)]


def _sorted_column(values: np.ndarray) -> bool:
    """Whether ``values`` is in non-decreasing order (piece by piece: no temporary of its length)."""
    for a, b in _pieces(values.size):
        lo = max(a - 1, 0)
        if not bool((values[lo + 1 : b] >= values[lo : b - 1]).all()):
            return False
    return True


def _merged(events: GpuEvents) -> tuple[np.ndarray, np.ndarray]:
    """The union of the activities' intervals as sorted, disjoint (starts, ends), made piece by
    piece in start order (the last group of a piece stays open for the next): memory is the union
    itself plus a piece's temporaries, never the ends of every activity."""
    size = len(events)
    if size == 0:
        return np.empty(0), np.empty(0)
    # Already in order (traces nearly always are): no sorting index.
    order = None if _sorted_column(events.start) else np.argsort(events.start, kind="stable")
    if order is not None and size < 2**31:
        order = order.astype(np.int32)  # held while the pieces are made: 4 bytes an activity less
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    open_group: tuple[float, float] | None = None
    for a, b in _pieces(size):
        if order is None:
            s, e = events.start[a:b], events.start[a:b] + events.dur[a:b]
        else:
            s, e = events.start[order[a:b]], events.start[order[a:b]] + events.dur[order[a:b]]
        if open_group is not None:
            s = np.concatenate(([open_group[0]], s))
            e = np.concatenate(([open_group[1]], e))
        reach = np.maximum.accumulate(e)
        new = np.empty(s.size, dtype=bool)
        new[0] = True
        new[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new)
        group_start, group_end = s[first], np.maximum.reduceat(e, first)
        starts.append(group_start[:-1])
        ends.append(group_end[:-1])
        open_group = (float(group_start[-1]), float(group_end[-1]))
        del s, e, reach, new, first
    assert open_group is not None
    starts.append(np.array([open_group[0]]))
    ends.append(np.array([open_group[1]]))
    return np.concatenate(starts), np.concatenate(ends)


class _Coverage:
    """How much of [lo, hi] disjoint sorted intervals cover, for many queries (prefix sums once)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.starts = starts
        self.lengths = ends - starts
        self.before = np.concatenate(([0.0], np.cumsum(self.lengths)))

    def _upto(self, x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.starts, x, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(x - self.starts[j], 0.0, self.lengths[j])
        return np.where(i >= 0, self.before[j] + inside, 0.0)

    def covered(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self.starts.size == 0:
            return np.zeros(lo.shape)
        return np.maximum(self._upto(hi) - self._upto(lo), 0.0)


def _streams(events: GpuEvents) -> list[int]:
    """The distinct streams, ascending (piece by piece: no sorted copy of the column)."""
    seen: set[int] = set()
    for a, b in _pieces(events.stream.size):
        seen.update(np.unique(events.stream[a:b]).tolist())
    return sorted(seen)


def _stream_index(events: GpuEvents, value: int) -> np.ndarray:
    """Indices of the stream's activities, in start order (stable: ties keep the file's order, as
    one stable sort by (stream, start) gives)."""
    index = np.flatnonzero(events.stream == value)
    if index.size < 2**31:  # 32-bit while held: 4 bytes an activity less
        index = index.astype(np.int32)
    starts = _gather(events.start, index)
    if not _sorted_column(starts):
        order = np.argsort(starts, kind="stable")
        del starts
        index = _gather(index, order.astype(np.int32) if order.size < 2**31 else order)
        del order
    return index


def _gather(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index]`` piece by piece: numpy would first copy a 32-bit index to 64 bits whole."""
    out = np.empty(index.size, dtype=values.dtype)
    for a, b in _pieces(index.size):
        out[a:b] = values[index[a:b]]
    return out


def _stream_gaps(
    events: GpuEvents, index: np.ndarray | None, coverage: _Coverage | None, threshold_us: float
) -> dict[str, float]:
    """One stream's gaps split by kind, piece by piece: the furthest end reached so far is carried
    from one piece to the next."""
    size = len(events) if index is None else index.size
    sums = dict.fromkeys(("idle_us", *IDLE_KINDS, "cross_stream_us"), 0.0)
    reach = -np.inf
    first_start = float("nan")
    last_end = -np.inf
    for a, b in _pieces(size):
        if index is None:
            start, dur, launch = events.start[a:b], events.dur[a:b], events.launch[a:b]
        else:
            part = index[a:b]
            start, dur, launch = events.start[part], events.dur[part], events.launch[part]
            del part
        end = start + dur
        if a == 0:
            first_start = float(start[0])
        last_end = max(last_end, float(end.max()))
        # The previous end is the furthest any earlier activity of the stream reached.
        prev_end = np.empty(end.size)
        prev_end[0] = reach
        np.maximum.accumulate(end[:-1], out=prev_end[1:])
        np.maximum(prev_end, reach, out=prev_end)
        reach = max(reach, float(end[-1]), float(prev_end[-1]))
        del end
        if a == 0:  # the stream's first activity has no gap before it
            start, prev_end, launch = start[1:], prev_end[1:], launch[1:]
        gap = np.maximum(start - prev_end, 0.0)
        known = ~np.isnan(launch)
        host = known & (launch > prev_end)
        short = ~host & (gap < threshold_us)
        unknown = ~host & ~short & ~known
        other = ~host & ~short & known
        sums["idle_us"] += float(gap.sum())
        sums["host_wait_us"] += float(gap[host].sum())
        sums["kernel_wait_us"] += float(gap[short].sum())
        sums["other_us"] += float(gap[other].sum())
        sums["unknown_us"] += float(gap[unknown].sum())
        if coverage is not None:
            sums["cross_stream_us"] += float(coverage.covered(prev_end[other], start[other]).sum())
    return {"activities": size, "span_us": last_end - first_start, **sums}


def idle_by_stream(events: GpuEvents, *, threshold_us: float = KERNEL_WAIT_US) -> dict[str, Any]:
    """Each stream's idle gaps split into host wait, kernel wait, other and unknown (point 1).

    Bounded memory: streams one at a time, each in pieces of ``PIECE`` activities; one stream
    already in start order (a kernel-only trace) takes no index and no copy of any column."""
    streams = _streams(events)
    # The stream itself runs nothing inside its own gaps: what covers a gap is other streams, so
    # one union of every stream serves all streams. One stream: nothing else covers its gaps.
    coverage = None if len(streams) <= 1 else _Coverage(*_merged(events))
    # One stream already in start order (a kernel-only trace): the columns serve as they are.
    whole = len(streams) == 1 and _sorted_column(events.start)
    rows = []
    for value in streams:
        index = None if whole else _stream_index(events, value)
        rows.append({"stream": int(value), **_stream_gaps(events, index, coverage, threshold_us)})
        del index
    rows.sort(key=lambda row: -row["idle_us"])
    totals = {key: sum(row[key] for row in rows) for key in ("idle_us", *IDLE_KINDS, "cross_stream_us")}
    return {"streams": rows, **totals}


# --- 2. kernel launch statistics ------------------------------------------------------------------------


def launch_statistics(events: GpuEvents) -> dict[str, Any] | None:
    """Launch delay and short kernels of the kernels whose launch call is known (point 2); None
    when the format does not give launch calls' durations."""
    if events.launch_dur is None:
        return None
    kernel = events.kind == KERNEL
    known = kernel & ~np.isnan(events.launch) & ~np.isnan(events.launch_dur)
    call = events.launch_dur[known]
    delay = np.maximum(events.start[known] - (events.launch[known] + call), 0.0)
    dur = events.dur[known]
    short = dur < call
    return {
        "kernels": int(kernel.sum()),
        "linked": int(known.sum()),
        "delay_us": _quantiles(delay),
        "call_us": _quantiles(call),
        "short_kernels": int(short.sum()),
        "short_share": float(short.sum() / known.sum()) if known.any() else None,
        "short_kernel_us": float(dur[short].sum()),
        "_delay": delay,  # dropped before storing: for the all-ranks quantiles
    }


# --- 3. steps ------------------------------------------------------------------------------------------------


def _compute_us(window: dict[str, Any]) -> float:
    return float(sum(window["categories"].get(c) or 0.0 for c in cats.COMPUTE))


def step_rows(trace: RankTrace, rank_summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per step of the rank that has GPU activity: its GPU window split into busy and idle,
    compute and exposed communication, and the CPU's ``ProfilerStep`` duration."""
    cpu = {step.number: step.end - step.start for step in trace.steps}
    rows = []
    for window in rank_summary.get("steps") or []:
        idle = window["categories"].get(cats.IDLE) or 0.0
        span = window["span_us"]
        rows.append(
            {
                "step": window["step"],
                "span_us": span,
                "busy_us": window["busy_us"],
                "idle_us": idle,
                "idle_share": idle / span if span else None,
                "compute_us": _compute_us(window),
                "communication_us": window["categories"].get("communication") or 0.0,
                "cpu_us": cpu.get(window["step"]),
            }
        )
    return rows


def steps_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    spans = np.array([row["span_us"] for row in rows], dtype=np.float64)
    slowest = max(rows, key=lambda row: row["span_us"])["step"] if rows else None
    return {"steps": len(rows), "span_us": _quantiles(spans), "slowest_step": slowest}


# --- 4. ranks: imbalance and the straggler ---------------------------------------------------------------


def _collective_starts(trace: RankTrace) -> np.ndarray:
    """Start of each communication kernel of the rank, in time order."""
    events = trace.events
    if events is None or not len(events):
        return np.empty(0)
    comm = np.array([cats.kernel_category(name) == "communication" for name in trace.names], dtype=bool)
    mine = comm[events.name] & (events.kind == KERNEL)
    return np.sort(events.start[mine])


def ranks_analysis(
    traces: list[RankTrace], rank_summaries: list[dict[str, Any]], steps: dict[int, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """Imbalance per step and the straggler rank (point 4); None for one rank or no timeline."""
    if len(traces) < 2 or any(trace.events is None for trace in traces):
        return None
    numbers = [trace.rank for trace in traces]
    rows = [
        {
            "rank": summary["rank"],
            "compute_us": _compute_us(summary),
            "communication_us": summary["categories"].get("communication") or 0.0,
            "idle_us": summary["categories"].get(cats.IDLE) or 0.0,
            "span_us": summary["span_us"],
            "late_collectives": 0,
        }
        for summary in rank_summaries
    ]
    by_rank = {row["rank"]: row for row in rows}
    # Collectives matched by order: the k-th communication kernel of each rank.
    starts = [_collective_starts(trace) for trace in traces]
    matched = min(s.size for s in starts)
    wait: dict[str, float | None] = {"p50": None, "p95": None, "max": None, "mean": None}
    if matched:
        grid = np.stack([s[:matched] for s in starts])  # ranks × collectives
        last = np.argmax(grid, axis=0)
        for index, count in zip(*np.unique(last, return_counts=True), strict=True):
            by_rank[numbers[int(index)]]["late_collectives"] = int(count)
        wait = _quantiles(grid.max(axis=0) - grid.min(axis=0))
    per_step = []
    common = set.intersection(*(set(row["step"] for row in steps.get(n, [])) for n in numbers))
    for number in sorted(common):
        compute = {n: next(r for r in steps[n] if r["step"] == number)["compute_us"] for n in numbers}
        top = max(compute.values())
        per_step.append(
            {
                "step": number,
                "slowest_rank": max(compute, key=lambda n: compute[n]),
                "compute_max_us": top,
                "compute_min_us": min(compute.values()),
                "imbalance": (top - min(compute.values())) / top if top else 0.0,
            }
        )
    compute_all = {row["rank"]: row["compute_us"] for row in rows}
    top = max(compute_all.values())
    if matched and max(row["late_collectives"] for row in rows) > 0:
        straggler = max(rows, key=lambda row: (row["late_collectives"], row["compute_us"]))["rank"]
        basis = "last to start the most collectives"
    else:
        straggler = max(compute_all, key=lambda n: compute_all[n])
        basis = "most compute time (no collectives to match)"
    return {
        "ranks": rows,
        "straggler_rank": straggler,
        "straggler_basis": basis,
        "collectives_matched": int(matched),
        "collective_wait_us": wait,
        "imbalance": (top - min(compute_all.values())) / top if top else 0.0,
        "steps": per_step,
    }


# --- the whole profile ----------------------------------------------------------------------------------------


def hta_analyse(data: ProfileData, summary: dict[str, Any]) -> dict[str, Any]:
    """Points 1-4 for every rank of ``data`` (``summary`` is ``analysis.profile_analyse(data)``)."""
    rank_summaries = summary["ranks"]
    idle: list[dict[str, Any]] = []
    launches: list[dict[str, Any]] = []
    steps: dict[int, list[dict[str, Any]]] = {}
    step_list: list[dict[str, Any]] = []
    delays: list[np.ndarray] = []
    for trace, rank_summary in zip(data.ranks, rank_summaries, strict=True):
        events = trace.events
        if events is None:
            continue
        if len(events):
            idle.append({"rank": trace.rank, **idle_by_stream(events)})
            stats = launch_statistics(events)
            if stats is not None:
                delays.append(stats.pop("_delay"))
                launches.append({"rank": trace.rank, **stats})
        rows = step_rows(trace, rank_summary)
        steps[trace.rank] = rows
        step_list.append({"rank": trace.rank, "rows": rows, **steps_summary(rows)})
    launch_total = None
    if launches:
        linked = sum(row["linked"] for row in launches)
        short = sum(row["short_kernels"] for row in launches)
        launch_total = {
            "kernels": sum(row["kernels"] for row in launches),
            "linked": linked,
            "delay_us": _quantiles(np.concatenate(delays)),
            "short_kernels": short,
            "short_share": short / linked if linked else None,
            "short_kernel_us": sum(row["short_kernel_us"] for row in launches),
        }
    idle_total = (
        {key: sum(row[key] for row in idle) for key in ("idle_us", *IDLE_KINDS, "cross_stream_us")}
        if idle
        else None
    )
    return {
        "kernel_wait_threshold_us": KERNEL_WAIT_US,
        "idle": {"ranks": idle, "total": idle_total} if idle else None,
        "launch": {"ranks": launches, "total": launch_total} if launches else None,
        "steps": step_list,
        "ranks": ranks_analysis(data.ranks, rank_summaries, steps),
    }


def profile_summary(data: ProfileData) -> dict[str, Any]:
    """``analysis.profile_analyse`` with these analyses under ``"hta"``: what is stored and printed."""
    summary = profile_analyse(data)
    summary["hta"] = hta_analyse(data, summary)
    return summary


# --- 5. profiling counters beside the breakdown -----------------------------------------------------------


def counters_reading(rows: list[dict[str, float | None]]) -> dict[str, Any] | None:
    """The means over the run's GPUs of DCGM's tensor-pipe and DRAM activity (%, each GPU's mean
    over the run's window), and what they say (``verdict.counters_bound``: busy tensor pipes are
    compute on tensor cores; DRAM busier than the tensor pipes, and at least ``DRAM_BUSY_PCT``, is
    memory-bound work). None without either counter."""
    out: dict[str, Any] = {}
    for name in ("tensor_active", "dram_active"):
        values = [row[name] for row in rows if row.get(name) is not None]
        out[name] = sum(v for v in values if v is not None) / len(values) if values else None
    bound = counters_bound(out["tensor_active"], out["dram_active"])
    if bound is None:
        return None
    out["bound"] = bound
    out["reading"] = {
        "memory": "memory-bound: DRAM is busier than the tensor pipes",
        "tensor": "compute-bound on tensor cores: the tensor pipes are busy",
        "neither": (
            f"neither the tensor pipes nor DRAM are busy half the time (below {TENSOR_BUSY_PCT:.0f}%): "
            "time goes to idle gaps, launches or other pipes"
        ),
    }[bound]
    return out
