"""Verdicts state only what their numbers show, and say what is unknown: each rule of
``profiles.verdict`` on both sides of its threshold, on profiles worked out by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from accelboard.importers.profile_data import KERNEL, MEMCPY, ActivitySum, GpuEvents, ProfileData, RankTrace
from accelboard.profiles import verdict as rules
from accelboard.profiles.analysis import profile_analyse


def _timeline(
    names: list[str],
    start: list[float],
    dur: list[float],
    *,
    launch_us: float = 8.0,
    kinds: list[int] | None = None,
) -> dict[str, Any]:
    n = len(start)
    events = GpuEvents(
        start=np.array(start, dtype=float),
        dur=np.array(dur, dtype=float),
        stream=np.zeros(n, dtype=np.int64),
        kind=np.array(kinds or [KERNEL] * n, dtype=np.int8),
        name=np.arange(n, dtype=np.int64),
        launch=np.array(start, dtype=float) - 1.0,  # each launched just before it starts
    )
    trace = RankTrace(
        rank=0, file="r0", names=names, events=events, runtime={"cudaLaunchKernel": [n, launch_us * n]}
    )
    return profile_analyse(ProfileData(source_format="kineto", files=["r0"], ranks=[trace]))


def _spaced(count: int, every_us: float, dur_us: float = 2.0) -> dict[str, Any]:
    return _timeline(
        [f"elementwise_{i}" for i in range(count)], [every_us * i for i in range(count)], [dur_us] * count
    )


def test_79_short_kernels_in_13_seconds_are_idle_not_launch_bound() -> None:
    # 79 kernels of 5 µs spread over 12.9 s; each launch call (8 µs) outlasts its kernel.
    every = 12.9e6 / 78
    summary = _spaced(79, every, 5.0)
    verdict = summary["verdict"]
    assert verdict["kind"] == "idle"
    assert "tiny" not in verdict["headline"] and "launch" not in verdict["headline"].lower()
    assert verdict["numbers"]["idle_us_per_kernel"] == pytest.approx((12.9e6 + 5 - 79 * 5) / 79)
    assert verdict["details"][0].startswith("79 kernels in 12.90 s")
    # the idle split is the measured one: every gap's kernel was launched after the gap began
    assert "100% waiting for work the CPU launched after the gap began" in verdict["details"][0]
    (finding,) = [line for line in summary["findings"] if "under 10 µs" in line]
    assert "launch overhead is not what it waits on" in finding


@pytest.mark.parametrize(
    ("every_us", "kind"),
    [
        # 100 kernels of 2 µs: idle per kernel = (span - busy) / kernels = (99 * every + 2 - 200) / 100
        (52.0, "launch-bound"),  # 49.5 µs of idle per kernel: at most LAUNCH_GAP_US
        (53.0, "idle"),  # 50.49 µs
    ],
)
def test_launch_bound_needs_idle_gaps_the_size_of_launches(every_us: float, kind: str) -> None:
    summary = _spaced(100, every_us)
    assert summary["verdict"]["kind"] == kind
    per_kernel = summary["verdict"]["numbers"]["idle_us_per_kernel"]
    assert per_kernel == pytest.approx((99 * every_us + 2 - 200) / 100)
    assert (per_kernel <= rules.LAUNCH_GAP_US) == (kind == "launch-bound")


@pytest.mark.parametrize(
    ("gemm_us", "copy_us", "kind"),
    [
        # back to back on one stream: the GEMM's share of the span is gemm / (gemm + copy)
        (60.0, 40.0, "memory-traffic-bound"),  # copies 40% ≥ MEMCPY_BOUND
        (90.0, 10.0, "compute-bound"),  # compute 90% ≥ COMPUTE_BOUND
    ],
)
def test_compute_bound_is_stated_with_its_share_and_what_is_unknown(
    gemm_us: float, copy_us: float, kind: str
) -> None:
    summary = _timeline(
        ["bf16_gemm", "Memcpy HtoD"], [0.0, gemm_us], [gemm_us, copy_us], kinds=[KERNEL, MEMCPY]
    )
    verdict = summary["verdict"]
    assert verdict["kind"] == kind
    if kind == "compute-bound":
        assert verdict["headline"] == "Compute-bound: the GPU runs compute kernels 90% of the time"
        assert any("arithmetic or by memory bandwidth" in item for item in verdict["unknown"])


def test_below_every_threshold_the_verdict_is_mixed_with_the_shares() -> None:
    # GEMM [0,45], NCCL [45,63], copy [63,75], idle [75,100], an empty GEMM at 100 ends the span:
    # compute 45% < 50%, communication 18% < 20%, copies 12% < 15%, idle 25% < 30%.
    summary = _timeline(
        ["bf16_gemm", "ncclDevKernel_AllReduce", "Memcpy HtoD", "bf16_gemm_b"],
        [0.0, 45.0, 63.0, 100.0],
        [45.0, 18.0, 12.0, 0.0],
        kinds=[KERNEL, KERNEL, MEMCPY, KERNEL],
    )
    shares = summary["totals"]["group_shares"]
    assert shares == pytest.approx({"compute": 0.45, "communication": 0.18, "memory": 0.12, "idle": 0.25})
    verdict = summary["verdict"]
    assert verdict["kind"] == "mixed"
    assert verdict["headline"] == "No single limit: 45% compute, 18% communication, 12% memory, 25% idle"


def test_summed_reports_without_timeline_claim_no_bound() -> None:
    trace = RankTrace(
        rank=0,
        file="cuda_gpu_kern_sum.csv",
        sums=[
            ActivitySum(name="sm90_xmma_gemm_bf16", kind=KERNEL, count=10, total_us=900.0),
            ActivitySum(name="[CUDA memcpy Host-to-Device]", kind=MEMCPY, count=2, total_us=100.0),
        ],
    )
    summary = profile_analyse(ProfileData(source_format="nsys-stats", files=["x.csv"], ranks=[trace]))
    verdict = summary["verdict"]
    assert verdict["kind"] == "no-timeline"
    assert "bound" not in verdict["headline"].lower()
    assert (
        verdict["headline"]
        == "Summed GPU time only: 90% compute, 10% memory (no timeline: idle time unknown)"
    )
    assert "idle time (no timeline in this format)" in verdict["unknown"]
    assert verdict["numbers"]["idle_share"] is None


def test_each_verdict_kind_is_a_stored_choice() -> None:
    from accelboard.profiles.choices import Verdict

    kinds = {"no-device-activity", "no-gpu-activity", "no-timeline", "launch-bound", "idle"}
    kinds |= {"communication-bound", "memory-traffic-bound", "compute-bound", "mixed"}
    assert kinds == set(Verdict.values)
