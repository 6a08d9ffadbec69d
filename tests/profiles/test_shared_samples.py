"""The real profiler files beside the checkout (``../shared/samples/profiles``), when present.

Each trace's breakdown must add up to its GPU timeline's span, idle must equal the gaps of the
union of all streams (checked here by an independent sweep over the raw JSON), and counts must
match what is read from the files by hand. Skipped where the samples are not there.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from accelboard.importers.profile_registry import profile_parse
from accelboard.profiles.analysis import profile_analyse
from accelboard.profiles.comparison import Side, profiles_compare

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "profiles"
KINETO = sorted((SAMPLES / "kineto").rglob("*.json*")) if SAMPLES.is_dir() else []
NSYS = sorted((SAMPLES / "nsys_stats").rglob("*.csv")) if SAMPLES.is_dir() else []
# Kernel events (cat "kernel") counted in each file by hand (the samples' README agrees).
KERNELS = {
    "mi250_minitoy_train_ROCm6_2_kineto.json.gz": 14,
    "benchmark_result_2869224_1695835535_trace.json.gz": 79,
    "benchmark_result_924719_1679055439_trace.json.gz": 0,
    "nccl_data.json.gz": 2700,
    "base.json.gz": 6,
    "test.json.gz": 5,
}

pytestmark = pytest.mark.skipif(not KINETO, reason="no shared profile samples beside the checkout")


def _gpu_intervals(path: Path) -> list[tuple[float, float]]:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as handle:
        events = json.load(handle)["traceEvents"]
    return [
        (e["ts"], e["ts"] + max(e.get("dur", 0), 0))
        for e in events
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")
    ]


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_kineto_breakdowns_add_up_and_idle_is_the_gaps(path: Path) -> None:
    summary = profile_analyse(profile_parse([(path.name, path)]))
    rank = summary["ranks"][0]
    assert rank["kernels"] == KERNELS[path.name]
    intervals = sorted(_gpu_intervals(path))
    if not intervals:
        # A trace that names its GPU is never called CPU-only (the CUPTI counter-mode sample).
        assert summary["verdict"]["kind"] == (
            "no-device-activity" if summary["devices"] else "no-gpu-activity"
        )
        return
    assert sum(rank["categories"].values()) == pytest.approx(rank["span_us"], rel=1e-9)
    # Independent sweep: idle = span − |union of all activities|.
    span = max(e for _, e in intervals) - intervals[0][0]
    covered, reach_start, reach_end = 0.0, intervals[0][0], intervals[0][1]
    for start, end in intervals[1:]:
        if start > reach_end:
            covered += reach_end - reach_start
            reach_start, reach_end = start, end
        else:
            reach_end = max(reach_end, end)
    covered += reach_end - reach_start
    assert rank["span_us"] == pytest.approx(span)
    assert rank["categories"]["idle"] == pytest.approx(span - covered, abs=1e-6)
    idle_kinds = rank["idle_host_us"] + rank["idle_other_us"] + rank["idle_unknown_us"]
    assert idle_kinds == pytest.approx(rank["categories"]["idle"], abs=1e-6)
    for step in rank["steps"]:
        assert sum(step["categories"].values()) == pytest.approx(step["span_us"], rel=1e-9)


def test_the_ddp_trace_has_its_nccl_kernels_as_communication() -> None:
    path = next(p for p in KINETO if p.name == "nccl_data.json.gz")
    summary = profile_analyse(profile_parse([(path.name, path)]))
    nccl = [row for row in summary["kernels"] if "nccl" in row["name"].lower()]
    assert sum(row["count"] for row in nccl) == 21
    assert {row["category"] for row in nccl} == {"communication"}
    assert summary["ranks"][0]["device"] == "NVIDIA A100-PG509-200"
    assert [s["step"] for s in summary["ranks"][0]["steps"]] == [4, 5, 6]


def test_the_comparison_of_the_hta_pair_shows_the_changed_kernels() -> None:
    base = next(p for p in KINETO if p.name == "base.json.gz")
    test = next(p for p in KINETO if p.name == "test.json.gz")
    summaries = [profile_analyse(profile_parse([(p.name, p)])) for p in (base, test)]
    sides = [
        Side(
            s["totals"]["ranks"], s["totals"]["steps"], s["timeline"], s["totals"]["categories"], s["kernels"]
        )
        for s in summaries
    ]
    result = profiles_compare(*sides)
    # By hand from the files: the CUDAFunctor_add<int> kernel runs 3× (12 µs) in base, 2× (8 µs) in test.
    changed = {row["name"]: row for row in result.kernels if row["status"] != "same"}
    (name,) = [n for n in changed if "CUDAFunctor_add<int>" in n]
    assert changed[name]["count_a"] == pytest.approx(3 / 2) and changed[name]["count_b"] == pytest.approx(
        2 / 2
    )
    assert result.unit == "per step and GPU"


@pytest.mark.parametrize("path", NSYS, ids=lambda p: p.parent.parent.parent.name)
def test_nsys_kernel_sums_match_the_files(path: Path) -> None:
    import csv

    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    summary = profile_analyse(profile_parse([(path.name, path)]))
    assert summary["kernels_total"] == len(rows)
    total_ns = sum(int(row["Total Time (ns)"]) for row in rows)
    assert summary["totals"]["busy_us"] == pytest.approx(total_ns / 1000)
    assert sum(v for v in summary["totals"]["categories"].values() if v) == pytest.approx(total_ns / 1000)
    assert summary["verdict"]["kind"] == "no-timeline"  # summed times: no bound claimed
    assert "bound" not in summary["verdict"]["headline"].lower()


def test_79_kernels_in_13_seconds_are_not_called_launch_bound() -> None:
    path = next(p for p in KINETO if p.name == "benchmark_result_2869224_1695835535_trace.json.gz")
    verdict = profile_analyse(profile_parse([(path.name, path)]))["verdict"]
    assert verdict["kind"] == "idle" and verdict["details"][0].startswith("79 kernels in 12.92 s")
