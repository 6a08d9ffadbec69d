"""Profile import in bounded memory: names beyond the bound folded by category, the whole-timeline
breakdown in chunks, the reading in a child process. The figures must not change."""

from __future__ import annotations

import io
import json
import tracemalloc

import numpy as np
import pytest

from accelboard.importers import kineto, profile_data
from accelboard.importers.profile_data import GpuEvents, ProfileData, RankTrace
from accelboard.importers.profile_registry import profile_parse
from accelboard.profiles import analysis, hta, services
from accelboard.testing.traces import kineto_document, kineto_event, write_training_trace


def _trace(distinct_names: int = 0, steps: int = 3) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=steps, layers=4, distinct_names=distinct_names)
    return buffer.getvalue()


def _summary(data: bytes) -> dict:
    return analysis.profile_analyse(profile_parse([("rank0.json", data)]))


def test_names_beyond_the_bound_are_folded_by_category_and_the_figures_stay(monkeypatch) -> None:
    data = _trace(distinct_names=500)
    whole = _summary(data)
    assert whole["kernels_total"] > 100 and not whole["warnings"]
    monkeypatch.setattr(profile_data, "MAX_NAMES", 8)
    folded = _summary(data)
    others = [row for row in folded["kernels"] if row["name"].startswith("(other ")]
    named = [row for row in folded["kernels"] if not row["name"].startswith("(other ")]
    assert len(named) <= 8 and others
    # An "other" row per kind and category, named as such, and its category is the names' own.
    assert {row["name"] for row in others} >= {"(other kernels, gemm: names beyond the top 8)"}
    for row in others:
        assert row["name"].startswith(f"(other {row['kind']}s, {row['category']}:")
    assert any("more than 8 distinct GPU activity names" in w for w in folded["warnings"])
    # Every activity is still counted, once: counts and times add up to the unbounded figures.
    assert sum(row["count"] for row in folded["kernels"]) == sum(row["count"] for row in whole["kernels"])
    assert sum(row["total_us"] for row in folded["kernels"]) == pytest.approx(
        sum(row["total_us"] for row in whole["kernels"])
    )
    for key in ("span_us", "busy_us", "idle_host_us", "idle_other_us", "overlap_us", "kernels", "kernel_us"):
        assert folded["totals"][key] == pytest.approx(whole["totals"][key]), key
    assert folded["totals"]["categories"] == pytest.approx(whole["totals"]["categories"])
    for mine, theirs in zip(folded["ranks"][0]["steps"], whole["ranks"][0]["steps"], strict=True):
        assert mine["categories"] == pytest.approx(theirs["categories"])
    assert folded["verdict"]["kind"] == whole["verdict"]["kind"]


def test_the_heaviest_names_are_the_ones_kept(monkeypatch) -> None:
    # 30 light kernels and 3 heavy ones, interleaved: the heavy ones keep their names.
    events = []
    at = 0.0
    for round_ in range(20):
        for index in range(30):
            events.append(kineto_event(f"light_{index}", "kernel", at, 1.0, stream=7, correlation=-1))
            at += 2.0
        for index in range(3):
            events.append(
                kineto_event(f"heavy_{index}", "kernel", at, 50.0 + round_, stream=7, correlation=-1)
            )
            at += 60.0
    data = json.dumps(kineto_document(events)).encode()
    monkeypatch.setattr(profile_data, "MAX_NAMES", 4)
    summary = analysis.profile_analyse(profile_parse([("rank0.json", data)]))
    names = [row["name"] for row in summary["kernels"]]
    assert sorted(names[:3]) == ["heavy_0", "heavy_1", "heavy_2"]
    assert sum(row["count"] for row in summary["kernels"]) == len(events)


def test_cpu_operator_names_are_bounded_too(monkeypatch) -> None:
    events = [kineto_event(f"aten::op_{i}", "cpu_op", float(i), 1.0 + i % 7) for i in range(100)]
    events.append(kineto_event("gemm_kernel", "kernel", 5.0, 3.0, stream=7))
    monkeypatch.setattr(kineto, "MAX_CPU_NAMES", 10)
    trace = profile_parse([("rank0.json", json.dumps(kineto_document(events)).encode())]).ranks[0]
    assert len(trace.ops) <= 2 * 10 + 1
    assert sum(count for count, _ in trace.ops.values()) == 100
    assert sum(total for _, total in trace.ops.values()) == pytest.approx(
        sum(1.0 + i % 7 for i in range(100))
    )


@pytest.mark.parametrize("steps", [0, 3])
def test_the_chunked_timeline_breakdown_gives_the_same_figures(monkeypatch, steps: int) -> None:
    data = _trace(steps=max(steps, 2))
    if not steps:  # no ProfilerStep ranges: the whole-timeline path without an end column
        data = data.replace(b"ProfilerStep#", b"NotAStep#")
    whole = _summary(data)
    monkeypatch.setattr(analysis, "CHUNK", 7)
    chunked = _summary(data)
    rank, other = whole["ranks"][0], chunked["ranks"][0]
    for key in ("span_us", "busy_us", "communication_us", "overlap_us", "idle_host_us", "idle_other_us"):
        assert other[key] == pytest.approx(rank[key]), key
    assert other["idle_unknown_us"] == pytest.approx(rank["idle_unknown_us"], abs=1e-9)
    assert other["categories"] == pytest.approx(rank["categories"])
    assert other["streams"] == rank["streams"]
    assert sum(other["categories"].values()) == pytest.approx(other["span_us"])


def test_a_large_upload_is_read_in_a_child_process_with_the_same_summary(monkeypatch) -> None:
    data = _trace()
    here = services.profile_summarise(files=[("rank0.json", data)])
    monkeypatch.setattr(services, "CHILD_PROCESS_BYTES", 0)
    called = []
    original = services._summarise_in_child
    monkeypatch.setattr(services, "_summarise_in_child", lambda files: called.append(1) or original(files))
    stream = io.BytesIO(data)
    there = services.profile_summarise(files=[("rank0.json", stream)])
    assert called and there == here and stream.tell() == 0
    with pytest.raises(services.ProfileRejected) as error:
        services.profile_summarise(
            files=[("rank0.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": -3}]}')]
        )
    assert "rank0.json" in error.value.message and "dur" in error.value.message


def _shuffled(events: GpuEvents, seed: int) -> GpuEvents:
    order = np.random.default_rng(seed).permutation(len(events))
    assert events.launch_dur is not None
    return GpuEvents(
        start=events.start[order],
        dur=events.dur[order],
        stream=events.stream[order],
        kind=events.kind[order],
        name=events.name[order],
        launch=events.launch[order],
        launch_dur=events.launch_dur[order],
    )


def test_idle_by_stream_in_pieces_and_out_of_order_gives_the_same_figures(monkeypatch) -> None:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=3, layers=4, input_wait_us=20_000.0)
    events = profile_parse([("rank0.json", buffer.getvalue())]).ranks[0].events
    assert events is not None and len(np.unique(events.stream)) >= 2
    assert np.unique(events.start).size == len(events)  # no ties: any order sorts back the same
    whole = hta.idle_by_stream(events)
    assert whole["cross_stream_us"] > 0 and whole["host_wait_us"] > 0
    monkeypatch.setattr(hta, "PIECE", 5)
    for variant in (events, _shuffled(events, 1)):
        pieces = hta.idle_by_stream(variant)
        assert [row["stream"] for row in pieces["streams"]] == [row["stream"] for row in whole["streams"]]
        for mine, theirs in zip(pieces["streams"], whole["streams"], strict=True):
            assert mine == pytest.approx(theirs, abs=1e-6)
        for key in ("idle_us", *hta.IDLE_KINDS, "cross_stream_us"):
            assert pieces[key] == pytest.approx(whole[key], abs=1e-6), key


def test_the_chunked_kernel_rows_add_up_to_the_same_figures(monkeypatch) -> None:
    data = _trace(distinct_names=50)
    whole = _summary(data)
    monkeypatch.setattr(analysis, "CHUNK", 7)
    chunked = _summary(data)
    assert [(r["name"], r["count"]) for r in chunked["kernels"]] == [
        (r["name"], r["count"]) for r in whole["kernels"]
    ]
    for mine, theirs in zip(chunked["kernels"], whole["kernels"], strict=True):
        assert mine == pytest.approx(theirs)
    assert chunked["ranks"][0]["short_kernels"] == whole["ranks"][0]["short_kernels"]
    assert chunked["ranks"][0]["short_kernel_us"] == pytest.approx(whole["ranks"][0]["short_kernel_us"])


def test_the_analyses_of_millions_of_tiny_kernels_need_memory_of_a_piece_not_of_the_trace() -> None:
    # Two million 3.5 µs kernels on one stream, 1.75 µs apart, launches unknown (a kernel-only
    # trace): the columns are 50 MB; the analyses' temporaries must stay far below them.
    size = 2_000_000
    start = np.arange(size, dtype=np.float64) * 5.25
    events = GpuEvents(
        start=start,
        dur=np.full(size, 3.5),
        stream=np.full(size, 7, dtype=np.int32),
        kind=np.zeros(size, dtype=np.int8),
        name=(np.arange(size) % 1000).astype(np.int32),
        launch=np.broadcast_to(np.float64(np.nan), (size,)),
        launch_dur=np.broadcast_to(np.float64(np.nan), (size,)),
    )
    trace = RankTrace(rank=0, file="rank0.json", names=[f"triton_poi_fused_{i}" for i in range(1000)])
    trace.events = events
    data = ProfileData(source_format="kineto", files=["rank0.json"], ranks=[trace])
    tracemalloc.start()
    try:
        summary = hta.profile_summary(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MiB"
    # And the figures are the hand-worked ones: every gap is 1.75 µs, a kernel wait (< 30 µs).
    idle = summary["hta"]["idle"]["total"]
    assert idle["idle_us"] == pytest.approx(1.75 * (size - 1))
    assert idle["kernel_wait_us"] == idle["idle_us"] and idle["unknown_us"] == 0.0
    rank = summary["ranks"][0]
    assert rank["span_us"] == pytest.approx(5.25 * (size - 1) + 3.5)
    assert rank["busy_us"] == pytest.approx(3.5 * size)
    assert rank["kernels"] == size and rank["short_kernels"] == size


def test_stream_and_correlation_ids_beyond_the_narrow_columns_are_kept() -> None:
    # Streams fit 16 bits and correlation ids 32 nearly always; the first that does not widens
    # the column to 64 bits, every earlier id kept.
    events = [
        kineto_event("gemm_a", "kernel", 0.0, 2.0, stream=7, correlation=5),
        kineto_event("gemm_b", "kernel", 10.0, 2.0, stream=40_000, correlation=2**33),
        kineto_event("gemm_c", "kernel", 20.0, 2.0, stream=2**40, correlation=6),
    ]
    data = json.dumps(kineto_document(events)).encode()
    trace = profile_parse([("rank0.json", data)]).ranks[0]
    assert trace.events is not None
    assert trace.events.stream.tolist() == [7, 40_000, 2**40]
    summary = hta.idle_by_stream(trace.events)
    assert sorted(row["stream"] for row in summary["streams"]) == [7, 40_000, 2**40]
    # Each stream has one activity: no gap of its own.
    assert summary["idle_us"] == 0.0


@pytest.mark.parametrize("launches", [True, False])
def test_a_rank_out_of_order_gives_the_breakdown_of_the_same_rank_in_order(
    monkeypatch, launches: bool
) -> None:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=3, layers=4, input_wait_us=20_000.0)
    trace = profile_parse([("rank0.json", buffer.getvalue())]).ranks[0]
    assert trace.events is not None and np.unique(trace.events.start).size == len(trace.events)
    if not launches:  # as a trace without runtime events reads: a read-only NaN view
        nan = np.broadcast_to(np.float64(np.nan), (len(trace.events),))
        trace.events.launch, trace.events.launch_dur = nan, nan
    monkeypatch.setattr(analysis, "CHUNK", 7)  # the sorted copy gathered in many chunks
    in_order = analysis.rank_analyse(trace)
    trace.events = _shuffled(trace.events, 2) if launches else _shuffled_no_launch(trace.events, 2)
    shuffled = analysis.rank_analyse(trace)
    # Distinct starts: the stable sort gives back the very columns read, so the very figures.
    for key in ("span_us", "busy_us", "categories", "overlap_us", "idle_host_us", "idle_other_us"):
        assert shuffled[key] == in_order[key], key
    assert shuffled["idle_unknown_us"] == in_order["idle_unknown_us"]
    assert (in_order["idle_host_us"] > 0) is launches
    assert shuffled["steps"] == in_order["steps"]


def _shuffled_no_launch(events: GpuEvents, seed: int) -> GpuEvents:
    order = np.random.default_rng(seed).permutation(len(events))
    return GpuEvents(
        start=events.start[order],
        dur=events.dur[order],
        stream=events.stream[order],
        kind=events.kind[order],
        name=events.name[order],
        launch=events.launch,
        launch_dur=events.launch_dur,
    )
