"""What limits a profile: the verdict and the secondary findings on an analysed profile. Pure.

Both read the summary ``analysis.profile_analyse`` builds (all ranks together). A verdict says
only what its numbers show, and names what the profile cannot tell (``unknown``).

The verdict (``profile_verdict``), first rule that holds:

0. no activity at all: **no-device-activity** when the trace names a device (it is then never
   called CPU-only: the profiler may have captured host activity only, or the device's activity
   is in a form not read), else **no-gpu-activity**;
1. no timeline (``nsys stats`` sums): **no-timeline**: the shares of summed GPU time by group,
   and no bound claimed: idle time, overlap and how busy the GPU was are unknown;
2. idle ≥ ``IDLE_BOUND`` (30%) of GPU time, signs of launch overhead (≥ ``SHORT_SHARE_BOUND``
   (50%) of kernels under ``SHORT_KERNEL_US`` (10 µs), or kernels shorter on average than their
   launch calls) **and** idle gaps short enough for launches to explain them (idle time per
   kernel ≤ ``LAUNCH_GAP_US``, 50 µs: a few launch calls): **launch-bound**. 79 kernels in 12.9 s
   leave 160 ms of idle per kernel: that is waiting, not launching;
3. idle ≥ 30%: **idle**, with how the idle time splits (waiting on the host, on other work,
   unknown) as measured;
4. exposed communication ≥ ``COMM_BOUND`` (20%): **communication-bound**;
5. memory copies ≥ ``MEMCPY_BOUND`` (15%), or elementwise/reduction kernels ≥
   ``ELEMENTWISE_BOUND`` (40%) of compute: **memory-traffic-bound**;
6. compute ≥ ``COMPUTE_BOUND`` (50%) of the timeline: **compute-bound**, with the top kernels (and
   the note that, without hardware counters, arithmetic- versus bandwidth-limited is unknown);
7. otherwise **mixed**: no part reaches its threshold; the shares are stated.
Each verdict carries the numbers it was decided on.

The profiling counters (``verdict_with_counters``). A trace times kernels but cannot say what
limits them; DCGM's ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` and ``DCGM_FI_PROF_DRAM_ACTIVE`` (or NVML's
GPM metrics), averaged over the run's GPUs and window, can. Given them, the stored verdict is read
again when it is shown (the counters arrive with telemetry, not with the trace):

a. DRAM active ≥ ``DRAM_BUSY_PCT`` (50%) and above tensor-pipe activity (or tensor unknown):
   DRAM bandwidth is what the kernels wait on;
b. else tensor pipes active ≥ ``TENSOR_BUSY_PCT`` (50%): arithmetic on tensor cores;
c. else neither is busy half the time: neither arithmetic on tensor cores nor DRAM bandwidth.

Only a **compute-bound** verdict changes on them (the GPU is busy, so the window's means speak
for its kernels): with (a) it becomes **memory-traffic-bound** ("bandwidth-bound"), with (b) it
stays compute-bound with "on tensor cores" and the unknown is answered, with (c) it stays
compute-bound and says neither pipe is saturated. Any other verdict only gains a line with the
counters: its idle gaps, launches or communication are in the window's means too, so the means
do not say what the kernels themselves wait on. Without either counter the verdict is unchanged
and still names arithmetic- versus bandwidth-limited as unknown. The counters are means over
the whole run, the trace a few steps of it: the details say so.
"""

from __future__ import annotations

import math
from typing import Any

from . import categories as cats

SHORT_KERNEL_US = 10.0
IDLE_BOUND = 0.30
COMM_BOUND = 0.20
MEMCPY_BOUND = 0.15
ELEMENTWISE_BOUND = 0.40
SHORT_SHARE_BOUND = 0.50
LAUNCH_GAP_US = 50.0
COMPUTE_BOUND = 0.50
IMBALANCE_HINT = 0.10
TENSOR_BUSY_PCT = 50.0
DRAM_BUSY_PCT = 50.0


def _share(totals: dict[str, Any], *keys: str) -> float:
    shares = totals["shares"]
    return sum(shares[k] or 0.0 for k in keys)


def profile_verdict(summary: dict[str, Any]) -> dict[str, Any]:
    totals = summary["totals"]
    timeline = summary["timeline"]
    idle = totals["shares"][cats.IDLE] if timeline else None
    comm = _share(totals, "communication")
    memcpy = _share(totals, *cats.MEMORY)
    compute_us = sum(totals["categories"][c] or 0.0 for c in cats.COMPUTE)
    elementwise = (totals["categories"]["elementwise"] / compute_us) if compute_us else 0.0
    kernels = totals.get("kernels") or 0
    short_share = (totals.get("short_kernels") or 0) / kernels if kernels and timeline else None
    kernel_mean = totals.get("kernel_us_mean")
    launch_mean = totals.get("launch_us_mean")
    top = [
        {"name": row["name"], "category": row["category"], "total_us": row["total_us"]}
        for row in summary["kernels"]
        if row["kind"] == "kernel"
    ][:5]
    numbers = {
        "idle_share": idle,
        "exposed_communication_share": comm,
        "memory_copy_share": memcpy,
        "elementwise_share_of_compute": elementwise,
        "short_kernel_share": short_share,
        "kernel_us_mean": kernel_mean,
        "launch_us_mean": launch_mean,
        "overlap_share_of_communication": (
            totals["overlap_us"] / totals["communication_us"]
            if timeline and totals.get("communication_us")
            else None
        ),
    }
    devices = summary.get("devices") or []
    if not totals.get("busy_us"):
        if devices:
            return {
                "kind": "no-device-activity",
                "headline": f"No activity read on {', '.join(devices)}: nothing to break down",
                "details": [
                    f"The trace names {', '.join(devices)}, so it is not a CPU-only profile, but no kernels, "
                    "copies or other device activity were read from it: the profiler may have captured host "
                    "activity only, or the device's activity is in a form this reader does not know."
                ],
                "unknown": ["what the device did: no device activity in the trace"],
                "numbers": numbers,
                "top_kernels": [],
            }
        return {
            "kind": "no-gpu-activity",
            "headline": "No GPU activity in this profile: nothing to break down",
            "details": [
                "The trace has no kernels, copies or memsets and names no device (a CPU-only profile, "
                "or one captured in CUPTI counter mode)."
            ],
            "unknown": [],
            "numbers": numbers,
            "top_kernels": [],
        }
    if not timeline:
        return _no_timeline(totals, numbers, top)
    host_idle = totals.get("idle_host_us") or 0.0
    idle_us = totals["categories"][cats.IDLE] or 0.0
    launch_signs = (short_share is not None and short_share >= SHORT_SHARE_BOUND) or (
        kernel_mean is not None and launch_mean is not None and kernel_mean < launch_mean
    )
    idle_per_kernel = idle_us / kernels if kernels else None
    numbers["idle_us_per_kernel"] = idle_per_kernel
    details: list[str] = []
    unknown: list[str] = []
    compute_share = _share(totals, *cats.COMPUTE)
    numbers["compute_share"] = compute_share
    if (
        idle is not None
        and idle >= IDLE_BOUND
        and launch_signs
        and idle_per_kernel is not None
        and idle_per_kernel <= LAUNCH_GAP_US
    ):
        kind = "launch-bound"
        headline = f"Launch-bound: the GPU is idle {idle:.0%} of the time between many short kernels"
        details.append(
            f"{int(kernels):,} kernels, {short_share or 0:.0%} of them under {SHORT_KERNEL_US:g} µs (mean kernel "
            f"{_us(kernel_mean)}"
            + (f", mean launch call {_us(launch_mean)}" if launch_mean is not None else "")
            + f"), with {_us(idle_per_kernel)} of idle per kernel: gaps the size of launch calls. CUDA graphs, "
            "torch.compile (fusing small kernels) or larger batches cut the launches."
        )
    elif idle is not None and idle >= IDLE_BOUND:
        kind = "idle"
        headline = f"Idle: the GPU has nothing to run {idle:.0%} of the time"
        other_idle = totals.get("idle_other_us") or 0.0
        unknown_idle = totals.get("idle_unknown_us") or 0.0
        split = [
            (host_idle, "waiting for work the CPU launched after the gap began"),
            (other_idle, "with the next work already launched (waiting on other work or a synchronisation)"),
            (unknown_idle, "with no launch time to tell why"),
        ]
        details.append(
            f"{int(kernels):,} kernels in {_us(totals.get('span_us'))}"
            + (f", {_us(idle_per_kernel)} of idle per kernel" if idle_per_kernel is not None else "")
            + ". Of the idle time: "
            + "; ".join(
                f"{part / idle_us:.0%} {what}" for part, what in split if idle_us and part >= 0.005 * idle_us
            )
            + "."
        )
        if idle_us and host_idle / idle_us >= 0.5:
            details.append(
                "The host is late: if that is data loading, more DataLoader workers, pinned memory or "
                "prefetching fill the gaps; the trace's CPU operators show where the host time goes."
            )
        if idle_us and unknown_idle / idle_us >= 0.5:
            unknown.append("why the GPU waited: the trace has no launch times for most gaps")
    elif comm >= COMM_BOUND:
        kind = "communication-bound"
        headline = f"Communication-bound: {comm:.0%} of GPU time is exposed communication"
        overlap = numbers["overlap_share_of_communication"]
        details.append(
            (f"Only {overlap:.0%} of communication overlaps compute. " if overlap is not None else "")
            + "Overlap collectives with compute (DDP bucket sizes, FSDP prefetch), compress or shard differently, "
            "or check the interconnect."
        )
    elif memcpy >= MEMCPY_BOUND or elementwise >= ELEMENTWISE_BOUND:
        kind = "memory-traffic-bound"
        if memcpy >= MEMCPY_BOUND:
            headline = f"Memory-traffic-bound: copies and memsets take {memcpy:.0%} of GPU time"
            details.append(
                "Host↔device copies stall the GPU: keep tensors on the device, use pinned memory and non_blocking copies."
            )
        else:
            headline = (
                f"Memory-traffic-bound: elementwise and reduction kernels take {elementwise:.0%} of compute"
            )
            details.append(
                "These kernels are limited by memory bandwidth, not arithmetic: fusing them (torch.compile, fused "
                "optimizers and norms) saves their reads and writes."
            )
    elif compute_share >= COMPUTE_BOUND:
        kind = "compute-bound"
        headline = f"Compute-bound: the GPU runs compute kernels {compute_share:.0%} of the time"
        details.append("Look at the top kernels: " + _top_text(top) + ".")
        unknown.append(
            "whether these kernels are limited by arithmetic or by memory bandwidth (no hardware counters)"
        )
    else:
        kind = "mixed"
        headline = "No single limit: " + _groups_text(totals)
        details.append(
            f"No part reaches its threshold (idle {IDLE_BOUND:.0%}, exposed communication {COMM_BOUND:.0%}, "
            f"copies {MEMCPY_BOUND:.0%}, compute {COMPUTE_BOUND:.0%}). Top kernels: " + _top_text(top) + "."
        )
    if unknown:
        details.append("Unknown: " + "; ".join(unknown) + ".")
    return {
        "kind": kind,
        "headline": headline,
        "details": details,
        "unknown": unknown,
        "numbers": numbers,
        "top_kernels": top,
    }


def _no_timeline(
    totals: dict[str, Any], numbers: dict[str, Any], top: list[dict[str, Any]]
) -> dict[str, Any]:
    """Rule 1: summed durations say what the busy time was spent on, and nothing about the rest."""
    unknown = [
        "idle time (no timeline in this format)",
        "overlap of communication with compute",
        "whether the GPU was busy or waiting, so no bound is claimed",
    ]
    unknown += [
        f"{group} time (its report is not among the files)" for group in totals.get("unknown_groups") or ()
    ]
    for key in ("idle_share", "overlap_share_of_communication", "short_kernel_share"):
        numbers[key] = None
    return {
        "kind": "no-timeline",
        "headline": "Summed GPU time only: " + _groups_text(totals) + " (no timeline: idle time unknown)",
        "details": [
            f"{int(totals.get('kernels') or 0):,} kernels took {_us(totals.get('busy_us'))} of GPU time in all. "
            "Top kernels: " + _top_text(top) + ".",
            "Unknown: " + "; ".join(unknown) + ".",
        ],
        "unknown": unknown,
        "numbers": numbers,
        "top_kernels": top,
    }


def _groups_text(totals: dict[str, Any]) -> str:
    shares = totals.get("group_shares") or {}
    parts = [
        f"{shares[group]:.0%} {group}"
        for group in cats.GROUPS
        if shares.get(group) is not None and shares[group] > 0
    ]
    return ", ".join(parts) or "no time"


def _top_text(top: list[dict[str, Any]]) -> str:
    return (
        "; ".join(f"{row['name'][:60]} ({row['category']}, {_us(row['total_us'])})" for row in top[:3])
        or "none"
    )


def counters_bound(tensor_pct: float | None, dram_pct: float | None) -> str | None:
    """What the tensor-pipe and DRAM activity (%) say, rules a-c above: ``"memory"``, ``"tensor"``,
    ``"neither"``; None without either counter."""
    if tensor_pct is None and dram_pct is None:
        return None
    if dram_pct is not None and dram_pct >= DRAM_BUSY_PCT and (tensor_pct is None or dram_pct > tensor_pct):
        return "memory"
    if tensor_pct is not None and tensor_pct >= TENSOR_BUSY_PCT:
        return "tensor"
    return "neither"


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f}%"


def verdict_with_counters(verdict: dict[str, Any], counters: dict[str, Any] | None) -> dict[str, Any]:
    """The stored ``verdict`` read again with the run window's profiling counters (``tensor_active``
    and ``dram_active``, % means; see the module's docstring): a new dict with ``counters`` (the
    means, the rule that held as ``bound``, and ``changed``: whether the kind or headline moved);
    ``verdict`` itself when there are no counters."""
    tensor = counters.get("tensor_active") if counters else None
    dram = counters.get("dram_active") if counters else None
    bound = counters_bound(tensor, dram)
    if bound is None:
        return verdict
    out = {
        **verdict,
        "details": list(verdict.get("details") or []),
        "unknown": list(verdict.get("unknown") or []),
    }
    measured = (
        f"Profiling counters, means over the run's window and GPUs: tensor pipes active {_pct(tensor)}, "
        f"DRAM active {_pct(dram)} (thresholds {TENSOR_BUSY_PCT:.0f}% and {DRAM_BUSY_PCT:.0f}%; the whole run, "
        "of which the trace is a part)."
    )
    kind = verdict.get("kind")
    changed = kind == "compute-bound"
    if kind == "compute-bound":
        share = (verdict.get("numbers") or {}).get("compute_share")
        busy = (
            f"compute kernels run {share:.0%} of the time"
            if share is not None
            else "compute kernels fill the GPU"
        )
        if bound == "memory":
            out["kind"] = "memory-traffic-bound"
            out["headline"] = f"Memory-bandwidth-bound: {busy} with DRAM active {_pct(dram)}"
            reading = (
                "DRAM is busier than the tensor pipes: the kernels wait on memory bandwidth, not arithmetic. "
                "Fusing kernels, larger tiles, lower-precision weights or the KV cache save reads and writes."
            )
        elif bound == "tensor":
            out["headline"] = (
                f"Compute-bound on tensor cores: {busy} with the tensor pipes active {_pct(tensor)}"
            )
            reading = "The tensor pipes are busy: arithmetic limits these kernels; less work (precision, sparsity) or a faster GPU helps."
        else:
            out["headline"] = (
                f"Compute-bound, neither pipe saturated: {busy}, tensor pipes {_pct(tensor)}, DRAM {_pct(dram)}"
            )
            reading = (
                "Neither the tensor pipes nor DRAM are busy half the time: the kernels are limited by something "
                "else (non-tensor arithmetic, latency, small grids)."
            )
        out["unknown"] = [u for u in out["unknown"] if "no hardware counters" not in u]
        out["details"] = [d for d in out["details"] if not d.startswith("Unknown: ")]
        out["details"] += [measured, reading]
        if out["unknown"]:
            out["details"].append("Unknown: " + "; ".join(out["unknown"]) + ".")
    else:
        out["details"].append(measured)
    out["counters"] = {"tensor_active": tensor, "dram_active": dram, "bound": bound, "changed": changed}
    return out


def profile_findings(summary: dict[str, Any]) -> list[str]:
    """Secondary observations, each with its number."""
    out: list[str] = []
    totals = summary["totals"]
    if summary["precision"]["hint"]:
        out.append(summary["precision"]["hint"])
    imbalance = summary["imbalance"]
    if imbalance and imbalance["spread"] >= IMBALANCE_HINT:
        out.append(
            f"Rank {imbalance['slowest_rank']} computes {imbalance['spread']:.0%} longer than rank "
            f"{imbalance['fastest_rank']}: the other ranks wait for it in collectives."
        )
    kernels = totals.get("kernels") or 0
    if summary["timeline"] and kernels:
        share = (totals.get("short_kernels") or 0) / kernels
        per_kernel = summary["verdict"]["numbers"].get("idle_us_per_kernel")
        if share >= SHORT_SHARE_BOUND and summary["verdict"]["kind"] != "launch-bound":
            if per_kernel is not None and per_kernel > LAUNCH_GAP_US:
                out.append(
                    f"{share:.0%} of kernels run under {SHORT_KERNEL_US:g} µs, but the GPU's idle time comes to "
                    f"{_us(per_kernel)} per kernel, far more than launches take: launch overhead is not what it waits on."
                )
            else:
                out.append(
                    f"{share:.0%} of kernels run under {SHORT_KERNEL_US:g} µs: launch overhead matters here."
                )
    if summary["timeline"] and totals.get("communication_us"):
        overlap = totals["overlap_us"] / totals["communication_us"]
        out.append(f"{overlap:.0%} of communication time overlaps compute.")
    return out


def _us(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f} s"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} µs"
