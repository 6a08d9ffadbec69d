"""The breakdown, idle gaps, steps, verdicts and the comparison, on traces worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelboard.importers import kineto
from accelboard.importers.profile_data import KERNEL, GpuEvents, ProfileData, RankTrace, Step
from accelboard.profiles import categories as cats
from accelboard.profiles.analysis import profile_analyse, window_breakdown
from accelboard.profiles.comparison import Side, change_headline, profiles_compare
from accelboard.profiles.cost_shares import cost_shares, headline_costs
from accelboard.testing.traces import kineto_document, kineto_event


def _overlapping_trace() -> bytes:
    """Worked by hand (µs). Stream 7: sgemm [0,100], memcpy [150,170], elementwise [300,310];
    stream 20: NCCL all-reduce [50,200]; stream 8: flash attention [305,320]. The GPU is idle
    [200,300], and the elementwise kernel after the gap was launched at 250: the GPU waited on
    the host. Step 1 launches the first three, step 2 the last two."""
    events = [
        kineto_event("ProfilerStep#1", "user_annotation", -10.0, 150.0, pid=9),
        kineto_event("ProfilerStep#2", "user_annotation", 240.0, 100.0, pid=9),
        kineto_event("cudaLaunchKernel", "cuda_runtime", -5.0, 2.0, correlation=1, pid=9),
        kineto_event("cudaLaunchKernel", "cuda_runtime", 40.0, 2.0, correlation=2, pid=9),
        kineto_event("cudaMemcpyAsync", "cuda_runtime", 140.0, 2.0, correlation=3, pid=9),
        kineto_event("cudaLaunchKernel", "cuda_runtime", 250.0, 2.0, correlation=4, pid=9),
        kineto_event("cudaLaunchKernel", "cuda_runtime", 260.0, 2.0, correlation=5, pid=9),
        kineto_event("ampere_sgemm_128x64_tn", "kernel", 0.0, 100.0, correlation=1),
        kineto_event(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", 50.0, 150.0, stream=20, correlation=2
        ),
        kineto_event("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 150.0, 20.0, correlation=3),
        kineto_event(
            "void at::native::vectorized_elementwise_kernel<4>", "kernel", 300.0, 10.0, correlation=4
        ),
        kineto_event("flash_fwd_kernel", "kernel", 305.0, 15.0, stream=8, correlation=5),
    ]
    return json.dumps(kineto_document(events)).encode()


def test_categories_and_idle_partition_the_timeline_and_idle_is_the_gaps() -> None:
    summary = profile_analyse(kineto.parse([("t.json", _overlapping_trace())]))
    rank = summary["ranks"][0]
    c = rank["categories"]
    assert rank["span_us"] == 320.0
    assert c["gemm"] == 100.0
    assert c["attention"] == 15.0  # attention outranks the elementwise kernel it overlaps
    assert c["elementwise"] == 5.0
    assert c["communication"] == 100.0  # exposed: [100, 200]
    assert c["memcpy_htod"] == 0.0  # hidden under the all-reduce
    assert c["idle"] == 100.0
    assert sum(c.values()) == rank["span_us"]
    # Wall time minus summed activity time would say 25 µs: wrong when streams overlap.
    assert rank["span_us"] - (100 + 150 + 20 + 10 + 15) == 25
    assert rank["communication_us"] == 150.0 and rank["overlap_us"] == 50.0
    assert rank["idle_host_us"] == 100.0 and rank["idle_other_us"] == 0.0


def test_step_windows_tile_the_timeline() -> None:
    summary = profile_analyse(kineto.parse([("t.json", _overlapping_trace())]))
    steps = summary["ranks"][0]["steps"]
    assert [(s["step"], s["start_us"], s["span_us"]) for s in steps] == [(1, 0.0, 200.0), (2, 200.0, 120.0)]
    assert steps[1]["categories"]["idle"] == 100.0 and steps[1]["idle_host_us"] == 100.0
    for step in steps:
        assert sum(step["categories"].values()) == pytest.approx(step["span_us"])
    assert sum(s["span_us"] for s in steps) == summary["ranks"][0]["span_us"]


def test_window_breakdown_matches_a_brute_force_sweep() -> None:
    rng = np.random.default_rng(7)
    start = np.sort(rng.uniform(0, 10_000, 400))
    dur = rng.exponential(40, 400)
    prio = rng.integers(0, len(cats.ORDER), 400)
    result = window_breakdown(start, start + dur, prio, np.full(400, np.nan), 1000.0, 9000.0)
    # A 0.5 µs grid: each instant counts for its highest-priority (lowest index) active category.
    grid = np.arange(1000.0, 9000.0, 0.5) + 0.25
    expected = dict.fromkeys(cats.ALL, 0.0)
    for t in grid:
        active = prio[(start <= t) & (start + dur > t)]
        expected[cats.ORDER[active.min()] if active.size else "idle"] += 0.5
    for key in cats.ALL:
        assert result["categories"][key] == pytest.approx(
            expected[key], abs=0.5 * 2 * 400 / len(cats.ALL) + 1
        )
    assert sum(result["categories"].values()) == pytest.approx(8000.0)


def _rank(
    names: list[str], start: list[float], dur: list[float], launch: list[float], rank: int = 0
) -> RankTrace:
    n = len(start)
    events = GpuEvents(
        start=np.array(start, dtype=float),
        dur=np.array(dur, dtype=float),
        stream=np.zeros(n, dtype=np.int64),
        kind=np.full(n, KERNEL, dtype=np.int8),
        name=np.arange(n, dtype=np.int64),
        launch=np.array(launch, dtype=float),
    )
    return RankTrace(
        rank=rank, file=f"r{rank}", names=names, events=events, runtime={"cudaLaunchKernel": [n, 8.0 * n]}
    )


@pytest.mark.parametrize(
    ("trace", "kind"),
    [
        # 100 kernels of 2 µs every 10 µs, each launched as the previous one ends: launch-bound.
        (
            _rank(
                [f"elementwise_{i}" for i in range(100)],
                [10.0 * i for i in range(100)],
                [2.0] * 100,
                [10.0 * i - 1 for i in range(100)],
            ),
            "launch-bound",
        ),
        # Two long GEMMs with a long gap launched late: idle / input-bound.
        (_rank(["sgemm_a", "sgemm_b"], [0.0, 1000.0], [300.0, 300.0], [-5.0, 900.0]), "idle"),
        # A GEMM then a long NCCL kernel: communication-bound.
        (
            _rank(["hgemm", "ncclKernel_AllReduce"], [0.0, 100.0], [100.0, 60.0], [-1.0, 50.0]),
            "communication-bound",
        ),
        # Mostly elementwise: memory-traffic-bound.
        (
            _rank(["hgemm", "vectorized_elementwise_kernel"], [0.0, 30.0], [30.0, 70.0], [-1.0, 20.0]),
            "memory-traffic-bound",
        ),
        # Back-to-back GEMMs: compute-bound.
        (_rank(["bf16_gemm_a", "bf16_gemm_b"], [0.0, 100.0], [100.0, 100.0], [-1.0, 50.0]), "compute-bound"),
    ],
)
def test_the_verdict_names_the_bottleneck(trace: RankTrace, kind: str) -> None:
    summary = profile_analyse(ProfileData(source_format="kineto", files=["x"], ranks=[trace]))
    assert summary["verdict"]["kind"] == kind
    assert summary["verdict"]["headline"]


def test_fp32_gemms_and_rank_imbalance_are_reported() -> None:
    ranks = [
        _rank(
            ["ampere_sgemm_128x64_tn", "ampere_bf16_s16816gemm_bf16"],
            [0.0, 500.0],
            [400.0, 100.0],
            [-1.0, 450.0],
            0,
        ),
        _rank(
            ["ampere_sgemm_128x64_tn", "ampere_bf16_s16816gemm_bf16"],
            [0.0, 500.0],
            [200.0, 100.0],
            [-1.0, 450.0],
            1,
        ),
    ]
    summary = profile_analyse(ProfileData(source_format="kineto", files=["a", "b"], ranks=ranks))
    assert summary["precision"]["by_precision"] == {"fp32": 600.0, "bf16": 200.0}
    assert summary["precision"]["fp32_share"] == pytest.approx(0.75)
    assert "75%" in summary["precision"]["hint"] and "same profile" in summary["precision"]["hint"]
    imbalance = summary["imbalance"]
    assert imbalance["slowest_rank"] == 0 and imbalance["spread"] == pytest.approx(0.4)
    assert any("Rank 0 computes 40% longer" in f for f in summary["findings"])


def test_cost_shares_split_the_cost_by_gpu_time() -> None:
    summary = profile_analyse(kineto.parse([("t.json", _overlapping_trace())]))
    costs = cost_shares(summary, cost=0.04, currency="USD", per="per 1M tokens")
    assert costs is not None
    assert sum(row["cost"] for row in costs["rows"]) == pytest.approx(0.04)
    idle = next(row for row in costs["candidates"] if row["what"] == "idle GPU time")
    assert idle["share"] == pytest.approx(100 / 320) and idle["cost"] == pytest.approx(0.04 * 100 / 320)
    assert headline_costs(costs)[0].startswith(
        "Idle GPU time is 31% of this run's cost: 0.0125 USD per 1M tokens"
    )
    assert cost_shares(summary, cost=None, currency="USD", per="x") is None


def _side(summary: dict) -> Side:
    totals = summary["totals"]
    return Side(
        ranks=totals["ranks"],
        steps=totals["steps"],
        timeline=summary["timeline"],
        categories=totals["categories"],
        kernels=summary["kernels"],
    )


def test_the_comparison_finds_slower_new_and_gone_kernels() -> None:
    before = profile_analyse(
        ProfileData(
            "kineto",
            ["a"],
            [_rank(["flash_fwd", "hgemm", "old_kernel"], [0, 100, 200], [100, 100, 10], [-1, 50, 150])],
        )
    )
    after = profile_analyse(
        ProfileData(
            "kineto",
            ["b"],
            [_rank(["flash_fwd", "hgemm", "new_kernel"], [0, 123, 223], [123, 100, 5], [-1, 50, 150])],
        )
    )
    result = profiles_compare(_side(before), _side(after))
    status = {row["name"]: (row["status"], row["delta_us"]) for row in result.kernels}
    assert status == {
        "flash_fwd": ("slower", 23.0),
        "hgemm": ("same", 0.0),
        "old_kernel": ("gone", -10.0),
        "new_kernel": ("new", 5.0),
    }
    assert result.unit == "per GPU, whole profile"
    assert result.net_us == pytest.approx(after["ranks"][0]["span_us"] - before["ranks"][0]["span_us"])
    assert change_headline(result) == "flash_fwd +23%, old_kernel gone"


def test_comparison_is_per_step_and_gpu_when_both_have_steps() -> None:
    one = _rank(["hgemm"], [0.0], [100.0], [0.0])
    one.steps = [Step(1, -1, 10)]
    two = _rank(["hgemm", "hgemm2"], [0.0, 100.0], [100.0, 100.0], [0.0, 20.0])
    two.names = ["hgemm", "hgemm"]
    two.steps = [Step(1, -1, 10), Step(2, 15, 30)]
    a = profile_analyse(ProfileData("kineto", ["a"], [one]))
    b = profile_analyse(ProfileData("kineto", ["b"], [two]))
    result = profiles_compare(_side(a), _side(b))
    assert result.unit == "per step and GPU"
    assert [(row["name"], row["status"]) for row in result.kernels] == [("hgemm", "same")]


def test_a_kernel_called_less_often_but_slower_per_call_is_not_called_faster() -> None:
    kernel = {"category": "compute"}
    a = Side(
        ranks=1,
        steps=0,
        timeline=True,
        categories={},
        kernels=[{**kernel, "name": "gemm", "count": 10, "total_us": 1000.0}],
    )
    b = Side(
        ranks=1,
        steps=0,
        timeline=True,
        categories={},
        kernels=[{**kernel, "name": "gemm", "count": 5, "total_us": 600.0}],
    )
    (row,) = profiles_compare(a, b).kernels
    assert row["status"] == "fewer calls"
    assert row["pct"] == pytest.approx(-40.0)
    assert (row["per_call_a_us"], row["per_call_b_us"]) == (100.0, 120.0)
    assert row["per_call_pct"] == pytest.approx(20.0)
    more = Side(
        ranks=1,
        steps=0,
        timeline=True,
        categories={},
        kernels=[{**kernel, "name": "gemm", "count": 20, "total_us": 1500.0}],
    )
    (row,) = profiles_compare(a, more).kernels
    assert (row["status"], row["per_call_pct"]) == ("more calls", pytest.approx(-25.0))
    same_calls = Side(
        ranks=1,
        steps=0,
        timeline=True,
        categories={},
        kernels=[{**kernel, "name": "gemm", "count": 10, "total_us": 800.0}],
    )
    (row,) = profiles_compare(a, same_calls).kernels
    assert (row["status"], row["per_call_pct"]) == ("faster", pytest.approx(-20.0))
