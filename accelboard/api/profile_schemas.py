"""The answer of ``GET /api/v1/runs/{run_id}/profile`` (``profiles.selectors.profile_answer``):
the run's profile as stored, its verdict read with the run window's profiling counters, and the
HTA-style analyses (``profiles.hta``). Times are microseconds; a figure the profile's format
cannot give is null, never 0. docs/api.md lists the fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field


class VerdictCountersOut(Schema):
    tensor_active: float | None = Field(
        description="Tensor-pipe activity, % (mean over the run's GPUs and window)"
    )
    dram_active: float | None = Field(description="DRAM activity, %")
    bound: str = Field(
        description="What the counters say (verdict.py, thresholds 50%): memory (DRAM ≥ 50% and busier "
        "than the tensor pipes), tensor (tensor pipes ≥ 50%) or neither"
    )
    changed: bool = Field(description="Whether the counters changed the verdict (only a compute-bound one)")


class VerdictOut(Schema):
    kind: str = Field(
        description="launch-bound, idle, communication-bound, memory-traffic-bound, compute-bound, mixed, "
        "no-timeline, no-gpu-activity or no-device-activity"
    )
    headline: str
    details: list[str]
    unknown: list[str] = Field(description="What the profile cannot tell, e.g. the bound without counters")
    numbers: dict[str, Any] = Field(description="The shares and means the verdict was decided on")
    top_kernels: list[dict[str, Any]] = []
    counters: VerdictCountersOut | None = Field(
        None, description="Present when the run's window has profiling counters: what they added"
    )


class CountersOut(Schema):
    tensor_active: float | None = Field(description="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (or NVML GPM), %")
    dram_active: float | None = Field(description="DCGM_FI_PROF_DRAM_ACTIVE (or NVML GPM), %")
    bound: str = Field(description="memory, tensor or neither")
    reading: str = Field(description="The same in words")


class HtaOut(Schema):
    kernel_wait_threshold_us: float | None = Field(
        description="A queued kernel's gap shorter than this is kernel wait (HTA's consecutive_kernel_delay)"
    )
    idle: dict[str, Any] | None = Field(
        description="Idle split by stream: 'ranks' (per rank: idle_us, host_wait_us, kernel_wait_us, "
        "other_us, unknown_us, cross_stream_us and 'streams') and their 'total'; null without a timeline"
    )
    launch: dict[str, Any] | None = Field(
        description="Kernel launch statistics: per rank and 'total' (kernels, linked, delay_us and call_us "
        "as p50/p95/max/mean, short_kernels, short_share, short_kernel_us); null without launch calls"
    )
    steps: list[dict[str, Any]] = Field(
        description="Per rank: 'rows' (step, span_us, busy_us, idle_us, idle_share, compute_us, "
        "communication_us, cpu_us), steps, span_us quantiles and slowest_step"
    )
    ranks: dict[str, Any] | None = Field(
        description="Several ranks: per rank compute/communication/idle and late_collectives, "
        "straggler_rank and straggler_basis, collectives_matched, collective_wait_us, imbalance and "
        "per-step imbalance; null for one rank"
    )


class ProfileOut(Schema):
    run_id: str = Field(description="The run's client id (UUID)")
    id: int = Field(description="The run's number")
    profile_url: str = Field(description="The run's Profile tab")
    source_format: str
    files: list[str]
    ranks: int
    steps: int
    timeline: bool = Field(description="False for summed reports (nsys stats): idle time unknown")
    devices: list[str]
    span_us: float | None
    busy_us: float
    verdict: VerdictOut
    counters: CountersOut | None = Field(
        description="The profiling counters of the run's host over its window; null without them"
    )
    findings: list[str]
    warnings: list[str] = Field(
        description="What to read with care (first: a trace from other hardware than the run's)"
    )
    hta: HtaOut
    created_at: datetime
