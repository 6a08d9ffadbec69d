"""What limits a profile: the verdict and the secondary findings on an analysed profile. Pure.

Both read the summary ``analysis.profile_analyse`` builds (all ranks together).

The verdict (``profile_verdict``), first rule that holds:

1. idle ≥ 30% of GPU time and many very short kernels (≥ 50% of kernels under
   ``SHORT_KERNEL_US``), or kernels shorter on average than their launch calls: **launch-bound**;
2. idle ≥ 30%: **idle / input-bound** (waiting on the host, or on dependencies);
3. exposed communication ≥ 20%: **communication-bound**;
4. memory copies ≥ 15%, or elementwise/reduction kernels ≥ 40% of compute:
   **memory-traffic-bound**;
5. otherwise **compute-bound**, with the top kernels to look at.
Thresholds are the module's constants; each verdict carries the numbers it was decided on.
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
IMBALANCE_HINT = 0.10


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
    if not totals.get("busy_us"):
        return {
            "kind": "no-gpu-activity",
            "headline": "No GPU activity in this profile: nothing to break down",
            "details": [
                "The trace has no kernels, copies or memsets (a CPU-only profile, or one captured in CUPTI counter mode)."
            ],
            "numbers": numbers,
            "top_kernels": [],
        }
    host_idle = totals.get("idle_host_us") or 0.0
    idle_us = totals["categories"][cats.IDLE] or 0.0
    launch_signs = (short_share is not None and short_share >= SHORT_SHARE_BOUND) or (
        kernel_mean is not None and launch_mean is not None and kernel_mean < launch_mean
    )
    details: list[str] = []
    if idle is not None and idle >= IDLE_BOUND and launch_signs:
        kind = "launch-bound"
        headline = f"Launch-bound: the GPU is idle {idle:.0%} of the time between many tiny kernels"
        details.append(
            f"{short_share or 0:.0%} of kernels run under {SHORT_KERNEL_US:g} µs (mean kernel {_us(kernel_mean)}"
            + (f", mean launch call {_us(launch_mean)}" if launch_mean is not None else "")
            + "): the CPU cannot issue them as fast as the GPU finishes them. CUDA graphs, torch.compile "
            "(fusing small kernels) or larger batches cut the launches."
        )
    elif idle is not None and idle >= IDLE_BOUND:
        kind = "idle"
        host_part = host_idle / idle_us if idle_us else 0.0
        headline = f"Idle / input-bound: the GPU has nothing to run {idle:.0%} of the time"
        details.append(
            f"{host_part:.0%} of the idle time the GPU waits for work the CPU launches late "
            "(data loading, preprocessing, Python overhead, synchronisations); "
            "more DataLoader workers, pinned memory, prefetching or overlapping the host work fill the gaps."
        )
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
    else:
        kind = "compute-bound"
        headline = "Compute-bound: the GPU is busy with compute" + (
            f" {_share(totals, *cats.COMPUTE):.0%} of the time" if timeline else ""
        )
        details.append(
            "Look at the top kernels: "
            + "; ".join(f"{row['name'][:60]} ({row['category']}, {_us(row['total_us'])})" for row in top[:3])
            + "."
        )
    if not timeline:
        details.append(
            "This report has no timeline (nsys stats sums): idle time and overlap are unknown, shares are of summed GPU time."
        )
    return {"kind": kind, "headline": headline, "details": details, "numbers": numbers, "top_kernels": top}


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
        if share >= SHORT_SHARE_BOUND and summary["verdict"]["kind"] != "launch-bound":
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
