"""HTA-style analyses (``profiles.hta``) on small hand-written traces whose figures are worked out
by hand in the comments: idle time by stream, launch statistics, steps, and several ranks."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelboard.importers import kineto
from accelboard.importers.profile_data import KERNEL, MEMCPY, GpuEvents, ProfileData
from accelboard.profiles.analysis import profile_analyse
from accelboard.profiles.hta import (
    KERNEL_WAIT_US,
    hta_analyse,
    idle_by_stream,
    launch_statistics,
    profile_summary,
)
from accelboard.testing.traces import KERNELS, NCCL, kineto_document, kineto_event

GEMM = KERNELS[0][0]
NAN = math.nan


def _events(rows: list[tuple[float, float, int, int, float, float]]) -> GpuEvents:
    """(start, dur, stream, kind, launch, launch_dur) rows."""
    start, dur, stream, kind, launch, call = (np.array(col) for col in zip(*rows, strict=True))
    return GpuEvents(
        start=start.astype(np.float64),
        dur=dur.astype(np.float64),
        stream=stream.astype(np.int64),
        kind=kind.astype(np.int8),
        name=np.zeros(len(rows), dtype=np.int64),
        launch=launch.astype(np.float64),
        launch_dur=call.astype(np.float64),
    )


def test_idle_by_stream_splits_each_gap_as_hta_does() -> None:
    events = _events(
        [
            (0.0, 10.0, 7, KERNEL, -5.0, 1.0),  # first on the stream: no gap before it
            (60.0, 10.0, 7, KERNEL, 15.0, 1.0),  # launched at 15, after the previous end (10): host wait 50
            (90.0, 10.0, 7, KERNEL, 16.0, 1.0),  # queued; gap 70..90 = 20 < 30: kernel wait 20
            (150.0, 10.0, 7, KERNEL, 17.0, 1.0),  # queued; gap 100..150 = 50: other
            (200.0, 5.0, 7, KERNEL, NAN, NAN),  # launch unknown, gap 160..200 = 40: unknown
            (120.0, 50.0, 20, KERNEL, 0.0, 1.0),  # stream 20 runs 120..170: 30 of the "other" gap
        ]
    )
    result = idle_by_stream(events)
    seven = next(row for row in result["streams"] if row["stream"] == 7)
    assert seven["host_wait_us"] == pytest.approx(50.0)
    assert seven["kernel_wait_us"] == pytest.approx(20.0)
    assert seven["other_us"] == pytest.approx(50.0)
    assert seven["unknown_us"] == pytest.approx(40.0)
    assert seven["cross_stream_us"] == pytest.approx(30.0)
    assert seven["span_us"] == pytest.approx(205.0)
    twenty = next(row for row in result["streams"] if row["stream"] == 20)
    assert twenty["idle_us"] == 0.0 and twenty["activities"] == 1
    # The kinds partition each stream's idle time; the totals are the streams' sums.
    for row in result["streams"]:
        kinds = ("host_wait_us", "kernel_wait_us", "other_us", "unknown_us")
        assert sum(row[k] for k in kinds) == pytest.approx(row["idle_us"])
        assert row["cross_stream_us"] <= row["other_us"] + 1e-9
    assert result["idle_us"] == pytest.approx(160.0)
    assert KERNEL_WAIT_US == 30.0  # HTA's consecutive_kernel_delay as its code compares it (µs)


def test_launch_statistics_delay_is_gpu_start_minus_the_end_of_the_launch_call() -> None:
    events = _events(
        [
            (7.0, 3.0, 7, KERNEL, 0.0, 5.0),  # call ends 5, starts 7: delay 2; 3 < 5: short
            (20.0, 100.0, 7, KERNEL, 10.0, 4.0),  # call ends 14: delay 6
            (130.0, 2.0, 7, KERNEL, 20.0, 6.0),  # call ends 26: delay 104; 2 < 6: short
            (205.0, 20.0, 7, KERNEL, 200.0, 10.0),  # call ends 210, starts 205 (clock skew): delay 0
            (240.0, 1.0, 7, MEMCPY, 230.0, 3.0),  # a copy: not a kernel launch
            (250.0, 1.0, 7, KERNEL, NAN, NAN),  # no launch call linked
        ]
    )
    stats = launch_statistics(events)
    assert stats is not None
    assert (stats["kernels"], stats["linked"], stats["short_kernels"]) == (5, 4, 2)
    # Delays 0, 2, 6, 104: median 4; p95 at rank 0.95 × 3 = 2.85: 6 + 0.85 × (104 - 6) = 89.3.
    assert stats["delay_us"]["p50"] == pytest.approx(4.0)
    assert stats["delay_us"]["p95"] == pytest.approx(89.3)
    assert stats["delay_us"]["max"] == pytest.approx(104.0)
    assert stats["delay_us"]["mean"] == pytest.approx(112.0 / 4)
    assert stats["call_us"]["p50"] == pytest.approx(5.5)  # calls 4, 5, 6, 10
    assert stats["short_share"] == pytest.approx(2 / 4)
    assert stats["short_kernel_us"] == pytest.approx(5.0)


def test_launch_statistics_are_unknown_when_the_format_gives_no_launch_calls() -> None:
    events = _events([(0.0, 1.0, 7, KERNEL, NAN, NAN)])
    events.launch_dur = None
    assert launch_statistics(events) is None


def _parse(*documents: dict[str, Any]) -> ProfileData:
    return kineto.parse([(f"rank{i}.json", json.dumps(doc).encode()) for i, doc in enumerate(documents)])


def test_the_kineto_importer_links_each_kernel_to_its_launch_calls_duration() -> None:
    doc = kineto_document(
        [
            kineto_event("cudaLaunchKernel", "cuda_runtime", 100.0, 4.5, correlation=1),
            kineto_event(GEMM, "kernel", 110.0, 50.0, correlation=1),
            kineto_event(GEMM, "kernel", 170.0, 50.0, correlation=99),  # no runtime event
            # Two kernels of one CUDA graph: launched at 300, but by no call of their own.
            kineto_event("cudaGraphLaunch", "cuda_runtime", 300.0, 20.0, correlation=5),
            kineto_event(GEMM, "kernel", 330.0, 5.0, correlation=5),
            kineto_event(GEMM, "kernel", 336.0, 5.0, correlation=5),
        ]
    )
    events = _parse(doc).ranks[0].events
    assert events is not None and events.launch_dur is not None
    assert events.launch.tolist()[0] == 100.0 and events.launch_dur.tolist()[0] == 4.5
    assert math.isnan(events.launch_dur[1]) and math.isnan(events.launch[1])
    assert events.launch.tolist()[2:] == [300.0, 300.0] and np.isnan(events.launch_dur[2:]).all()
    stats = launch_statistics(events)
    assert stats is not None and (stats["kernels"], stats["linked"]) == (4, 1)


def _rank(rank: int, gemm_us: float, comm_start: float, comm_name: str) -> dict[str, Any]:
    """One step (CPU 0..100): a GEMM from 10 on stream 7, then an all-reduce on stream 20."""
    return kineto_document(
        [
            kineto_event("ProfilerStep#1", "user_annotation", 0.0, 100.0),
            kineto_event("cudaLaunchKernel", "cuda_runtime", 2.0, 3.0, correlation=1),
            kineto_event(GEMM, "kernel", 10.0, gemm_us, correlation=1),
            kineto_event("cudaLaunchKernel", "cuda_runtime", 6.0, 2.0, correlation=2),
            kineto_event(comm_name, "kernel", comm_start, 90.0 - comm_start, stream=20, correlation=2),
        ],
        rank=rank,
        world_size=2,
    )


def test_two_ranks_name_the_straggler_and_the_imbalance() -> None:
    # Rank 0: GEMM 10..60, all-reduce 70..90. Rank 1 (an older NCCL's kernel name): GEMM 10..80,
    # all-reduce 80..90. Rank 1 starts the collective last (10 µs after rank 0): the straggler.
    data = _parse(
        _rank(0, 50.0, 70.0, NCCL),
        _rank(1, 70.0, 80.0, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
    )
    summary = profile_analyse(data)
    hta = hta_analyse(data, summary)
    ranks = hta["ranks"]
    assert ranks["straggler_rank"] == 1 and ranks["straggler_basis"].startswith("last to start")
    assert ranks["collectives_matched"] == 1
    assert ranks["collective_wait_us"]["max"] == pytest.approx(10.0)
    by_rank = {row["rank"]: row for row in ranks["ranks"]}
    assert by_rank[0]["compute_us"] == pytest.approx(50.0) and by_rank[1]["compute_us"] == pytest.approx(70.0)
    # Exposed communication: rank 0's all-reduce runs alone 70..90; rank 1's 80..90.
    assert by_rank[0]["communication_us"] == pytest.approx(20.0)
    assert by_rank[1]["communication_us"] == pytest.approx(10.0)
    assert (by_rank[0]["late_collectives"], by_rank[1]["late_collectives"]) == (0, 1)
    assert ranks["imbalance"] == pytest.approx(20.0 / 70.0)
    assert ranks["steps"] == [
        {
            "step": 1,
            "slowest_rank": 1,
            "compute_max_us": pytest.approx(70.0),
            "compute_min_us": pytest.approx(50.0),
            "imbalance": pytest.approx(20.0 / 70.0),
        }
    ]
    # Steps: the GPU window 10..90 of step 1, busy 70 and idle 10 on rank 0 (60..70), CPU step 100.
    step0 = next(item for item in hta["steps"] if item["rank"] == 0)
    (row,) = step0["rows"]
    assert (row["step"], row["span_us"], row["busy_us"], row["idle_us"], row["cpu_us"]) == (
        1,
        pytest.approx(80.0),
        pytest.approx(70.0),
        pytest.approx(10.0),
        100.0,
    )
    assert row["busy_us"] + row["idle_us"] == pytest.approx(row["span_us"])
    assert step0["slowest_step"] == 1
    # Launches: rank 0's GEMM call ends at 5, starts 10 (delay 5); the all-reduce call ends at 8,
    # starts 70 (delay 62). Neither is shorter than its call.
    launch0 = next(item for item in hta["launch"]["ranks"] if item["rank"] == 0)
    assert launch0["delay_us"]["p50"] == pytest.approx((5.0 + 62.0) / 2)
    assert launch0["short_kernels"] == 0
    # Rank 1: delays 5 and 72; all four delays over both ranks: median (5 + 5 + 62 + 72) / 4 ... of 5, 5, 62, 72 = 33.5.
    assert hta["launch"]["total"]["delay_us"]["p50"] == pytest.approx(33.5)
    assert hta["launch"]["total"]["linked"] == 4
    # Idle by stream: each rank's streams have one activity: no gaps.
    assert hta["idle"]["total"]["idle_us"] == 0.0
    json.dumps(hta)  # JSON-ready


def test_one_rank_has_no_straggler_and_a_report_without_a_timeline_gives_unknowns() -> None:
    data = _parse(_rank(0, 50.0, 70.0, NCCL))
    hta = hta_analyse(data, profile_analyse(data))
    assert hta["ranks"] is None and hta["idle"] is not None
    data.ranks[0].events = None  # as a summed report (nsys stats CSV) gives it
    summary = profile_analyse(data)
    hta = hta_analyse(data, summary)
    assert (hta["idle"], hta["launch"], hta["ranks"]) == (None, None, None)


def test_the_generated_training_trace_idle_kinds_partition_each_streams_idle_time() -> None:
    from accelboard.testing.traces import write_training_trace

    buffer = io.BytesIO()
    write_training_trace(buffer, steps=3, layers=4, input_wait_us=20_000.0)
    data = kineto.parse([("rank0.json", buffer.getvalue())])
    hta = hta_analyse(data, profile_analyse(data))
    (rank,) = hta["idle"]["ranks"]
    kinds = rank["host_wait_us"] + rank["kernel_wait_us"] + rank["other_us"] + rank["unknown_us"]
    assert kinds == pytest.approx(rank["idle_us"]) and rank["host_wait_us"] > 0
    # A data loader of 16-24 ms per step, against about 6 ms of GPU work a step, leaves the GPU
    # waiting on the host for over 10 ms before each later step's input copy.
    assert rank["host_wait_us"] >= 2 * 10_000.0
    assert rank["host_wait_us"] <= rank["idle_us"]
    steps = hta["steps"][0]
    assert steps["steps"] == 3 and len(steps["rows"]) == 3


SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "profiles"
ALEXNET = SAMPLES / "kineto/facebookresearch-HolisticTraceAnalysis/tests/data/critical_path/alexnet"


@pytest.mark.skipif(not ALEXNET.is_dir(), reason="no shared profile samples beside the checkout")
def test_on_htas_own_alexnet_trace_the_figures_are_htas() -> None:
    # HolisticTraceAnalysis 0.5.0 on this file: get_idle_time_breakdown() per stream (host wait,
    # kernel wait, other) and get_cuda_kernel_launch_stats() (its kernels' launch delays, median).
    (path,) = sorted(ALEXNET.glob("*.json.gz"))
    data = kineto.parse([(path.name, path)])
    hta = hta_analyse(data, profile_analyse(data))
    streams = {row["stream"]: row for row in hta["idle"]["ranks"][0]["streams"]}
    assert (streams[7]["host_wait_us"], streams[7]["kernel_wait_us"], streams[7]["other_us"]) == (
        12855007.0,
        104.0,
        0.0,
    )
    assert (streams[20]["host_wait_us"], streams[20]["kernel_wait_us"], streams[20]["other_us"]) == (
        12011718.0,
        3.0,
        0.0,
    )
    launch = hta["launch"]["ranks"][0]
    assert (launch["kernels"], launch["linked"]) == (79, 79) and launch["delay_us"]["p50"] == 343.0


def test_an_nsys_sqlite_export_gives_the_figures_its_kineto_twin_gives(tmp_path: Path) -> None:
    from accelboard.importers.profile_registry import profile_parse
    from accelboard.testing.nsys_export import write_export
    from tests.profiles.test_nsys_sqlite_import import _kineto_twin

    export = write_export(tmp_path / "report.sqlite")
    ours = profile_summary(profile_parse([("report.sqlite", str(export))]))["hta"]
    theirs = profile_summary(profile_parse([("trace.json", _kineto_twin())]))["hta"]
    assert ours["idle"]["total"] == pytest.approx(theirs["idle"]["total"])
    # Kernel launches by hand: GEMM call 990-995, starts 1000 (5); all-reduce 996-999, starts 1050
    # (51); add 1280-1284, starts 1400 (116). None is shorter than its call.
    for side in (ours, theirs):
        launch = side["launch"]["total"]
        assert (launch["kernels"], launch["linked"], launch["short_kernels"]) == (3, 3, 0)
        assert launch["delay_us"]["p50"] == pytest.approx(51.0)
        assert launch["delay_us"]["max"] == pytest.approx(116.0)
    # Stream 7 by hand: the gap 1100-1300 before the copy waits on the host (launched at 1250,
    # after the GEMM ended at 1100); 1315-1400 before the add (launched at 1280, queued): other,
    # 85 µs, of which the all-reduce on stream 20 runs none (it ended at 1200).
    (seven,) = [row for row in ours["idle"]["ranks"][0]["streams"] if row["stream"] == 7]
    assert seven["host_wait_us"] == pytest.approx(200.0) and seven["other_us"] == pytest.approx(85.0)
    assert seven["cross_stream_us"] == 0.0
