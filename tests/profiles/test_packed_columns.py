"""The packed columns a trace is read into (``profile_data.PackedColumn``) give back every time and
id exactly, at the edges of the encoding too: timestamps beyond 2**53 ns, durations beyond 32
bits of nanoseconds, times that are not whole nanoseconds, events out of order, ids near 2**63.
And the cached kernel category is the uncached one."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest

from accelboard.importers import kineto, profile_data
from accelboard.importers.profile_data import PackedColumn, pack, unpack
from accelboard.importers.profile_registry import profile_parse
from accelboard.profiles import analysis, categories, services
from accelboard.testing.traces import kineto_document, kineto_event


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


EDGE_TIMES = [
    np.arange(1_000, dtype=np.float64) * 5.25 + 1_000_000.0,  # in order, whole ns: 16-bit steps
    np.array([1.7e12 + 0.001 * i for i in range(50)]),  # epoch microseconds with ns decimals
    np.array([9.1e12, 9.1e12 + 3.0, 9.3e12, 1.0]),  # beyond 2**53 ns, then a jump back
    np.array([1e300, 0.5, 1.0 / 3.0, 2.0**-40]),  # not whole nanoseconds: kept as read
    np.array([3.0e6, 2_147_483.648, 2_147_483.647, 0.0]),  # durations over int32 nanoseconds
    np.array([5.0, -7.5, 1e9, -1e9, 12.345]),  # out of order, far apart
    np.array([42.0]),
]
EDGE_IDS = [
    np.arange(70_000, dtype=np.int64),
    np.array([2**63 - 1, -(2**63), 0, -1, 2**63 - 2], dtype=np.int64),  # differences overflow
    np.array([-1] * 5 + [2**40], dtype=np.int64),
    np.array([7], dtype=np.int64),
]


@pytest.mark.parametrize("values", EDGE_TIMES + EDGE_IDS)
def test_a_chunk_decodes_to_the_values_packed(values: np.ndarray) -> None:
    assert _same(unpack(pack(values)), values)


def test_random_chunks_decode_exactly_and_whole_nanoseconds_are_narrow() -> None:
    rng = random.Random(36)
    for _ in range(200):
        size = rng.randint(1, 300)
        scale = rng.choice([1e-3, 1.0, 1e3, 1e6, 1e9, 1e12, 1e16])
        values = np.array([round(rng.uniform(-scale, scale), rng.choice([0, 3, 3, 7])) for _ in range(size)])
        assert _same(unpack(pack(values)), values)
    in_order = np.cumsum(np.full(4096, 3.125)) + 1.7e12
    packed = pack(in_order)
    assert (
        packed[0] == "ns" and sum(p.nbytes for p in packed if isinstance(p, np.ndarray)) <= 2 * in_order.size
    )


def test_a_column_of_many_chunks_gives_every_value_back(monkeypatch) -> None:
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 8)
    values = np.concatenate(EDGE_TIMES)
    column = PackedColumn("d")
    for i, value in enumerate(values.tolist()):
        column.buffer.append(value)
        if len(column.buffer) >= 8 or i % 13 == 0:
            column.seal()
    assert len(column) == values.size
    assert _same(column.take(), values)
    assert len(column) == 0  # read once: the packed chunks are freed


def _edge_trace() -> tuple[bytes, list[dict]]:
    """Kernels on two streams, out of order, with huge times and long kernels, and names that
    recur: what the reader must give back exactly."""
    rng = random.Random(7)
    events = []
    base = 1.7e12
    for i in range(700):
        start = base + rng.choice([0.001, 1.0, 2.5e6, 1 / 3]) * i + rng.choice([0.0, 0.0, -40.0, 3.0e6])
        dur = rng.choice([3.5, 0.001, 2_147_484.0, 5.0e6, 1 / 7, 0.0])
        events.append(
            kineto_event(f"gemm_{i % 23}", "kernel", start, dur, stream=7 + i % 2, correlation=10 * i)
        )
    events.append(kineto_event("huge_ts_kernel", "kernel", 9.5e12, 12.25, stream=7, correlation=99_999))
    return json.dumps(kineto_document(events)).encode(), events


def test_a_trace_read_in_small_chunks_keeps_every_time_exactly(monkeypatch) -> None:
    data, events = _edge_trace()
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 64)
    small = profile_parse([("rank0.json", data)])
    read = small.ranks[0].events
    assert read is not None
    # Independent: the numbers as the JSON decoder gives them, in file order.
    decoded = json.loads(data)["traceEvents"]
    kernels = [e for e in decoded if e.get("cat") == "kernel"]
    assert _same(read.start, np.array([e["ts"] for e in kernels], dtype=np.float64))
    assert _same(read.dur, np.array([e["dur"] for e in kernels], dtype=np.float64))
    assert read.stream.tolist() == [e["args"]["stream"] for e in kernels]
    names = small.ranks[0].names
    assert [names[i] for i in read.name.tolist()] == [e["name"] for e in kernels]
    # Busy time against a plain union of intervals (merged in Python, sorted by start).
    intervals = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    busy, reach = 0.0, -np.inf
    for lo, hi in intervals:
        if hi > reach:
            busy += hi - max(lo, reach)
            reach = hi
    summary = analysis.profile_analyse(small)
    assert summary["totals"]["busy_us"] == pytest.approx(busy, rel=1e-12)
    assert sum(row["count"] for row in summary["kernels"]) == len(events)
    assert sum(row["total_us"] for row in summary["kernels"]) == pytest.approx(sum(e["dur"] for e in kernels))


def test_names_beyond_the_bound_land_in_their_other_rows_across_chunks(monkeypatch) -> None:
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 16)
    monkeypatch.setattr(profile_data, "MAX_NAMES", 3)
    events = [
        kineto_event(name, "kernel", float(i), dur, stream=7, correlation=i)
        for i, (name, dur) in enumerate(
            [(f"triton_poi_fused_{i}", 1.0) for i in range(40)]
            + [("sm90_gemm_a", 50.0), ("sm90_gemm_b", 40.0)] * 10
            + [("ncclDevKernel_AllReduce", 30.0)] * 5
        )
    ]
    data = json.dumps(kineto_document(events)).encode()
    trace = profile_parse([("rank0.json", data)]).ranks[0]
    assert trace.events is not None
    by_name: dict[str, list[float]] = {}
    for index, dur in zip(trace.events.name.tolist(), trace.events.dur.tolist(), strict=True):
        by_name.setdefault(trace.names[index], []).append(dur)
    assert by_name["sm90_gemm_a"] == [50.0] * 10 and by_name["sm90_gemm_b"] == [40.0] * 10
    assert by_name["ncclDevKernel_AllReduce"] == [30.0] * 5
    assert by_name["(other kernels, elementwise: names beyond the top 3)"] == [1.0] * 40


NAMES = [
    "triton_poi_fused_123",
    "triton_poi_fused_7",
    "fft2d_r2c_32x32",
    "fft22d_kernel",  # "fft2d" does not match a run of two digits
    "im2col_kernel",
    "im22col",
    "col2im",
    "sm90_xmma_gemm_f16f16_128x256",
    "ampere_sgemm_64x64_nn",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "void at::native::vectorized_elementwise_kernel<4, float>",
    "flash_fwd_kernel_hdim128",
    "conv2d_fprop_kernel",
    "convert_fp16_to_fp32",
    "kernel_12",
    "Memcpy HtoD (Pinned -> Device)",
]


@pytest.mark.parametrize("name", NAMES)
def test_the_cached_category_is_the_uncached_one(name: str) -> None:
    assert categories._CACHEABLE
    for _ in range(2):  # the second time from the cache
        assert categories.kernel_category(name) == categories._kernel_category(name.lower())
    # The same shape with other numbers shares the cache entry and still matches.
    other = name.replace("123", "98765").replace("128", "64")
    assert categories.kernel_category(other) == categories._kernel_category(other.lower())


def test_a_rule_with_digits_beside_digits_turns_the_cache_off() -> None:
    assert categories._digits_stand_alone(("fft2d", "im2col"))
    assert not categories._digits_stand_alone(("sm90",))
    assert not categories._digits_stand_alone(("2d",))


def _kernels(count: int, rank: int = 0) -> bytes:
    events = [kineto_event(f"k{i % 5}", "kernel", float(i), 0.5, correlation=i) for i in range(count)]
    return json.dumps(kineto_document(events, rank=rank, world_size=2)).encode()


def test_a_profile_beyond_the_activity_limit_is_refused_naming_the_limit(monkeypatch) -> None:
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 16)
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 100)
    assert len(profile_parse([("rank0.json", _kernels(100))]).ranks[0].events) == 100
    for files in (
        [("rank0.json", _kernels(101))],
        [("rank0.json", _kernels(60)), ("rank1.json", _kernels(60, 1))],
    ):
        with pytest.raises(kineto.TooLarge) as refused:
            profile_parse(files)
        assert refused.value.code == "too_large"
        assert "more than 100 GPU activities" in str(refused.value)
        assert refused.value.file == files[-1][0]


@pytest.mark.parametrize("in_child", [False, True])
def test_the_server_refuses_it_with_its_code_read_in_a_child_or_not(monkeypatch, in_child: bool) -> None:
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 50)
    monkeypatch.setattr(services, "CHILD_PROCESS_BYTES", 0 if in_child else 1 << 30)
    with pytest.raises(services.ProfileRejected) as refused:
        services.profile_summarise(files=[("rank0.json", io.BytesIO(_kernels(200)))])
    assert refused.value.code == "too_large"
    assert "rank0.json" in refused.value.message and "more than 50 GPU activities" in refused.value.message


def test_launch_times_count_against_the_limit(monkeypatch) -> None:
    # 16 more bytes an activity once launch times are joined: an activity counts as 1.6.
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 16)
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 100)

    def launched(count: int) -> bytes:
        events = []
        for i in range(count):
            events.append(kineto_event("cudaLaunchKernel", "cuda_runtime", float(2 * i), 0.5, correlation=i))
            events.append(kineto_event(f"k{i % 5}", "kernel", float(2 * i + 1), 0.5, correlation=i))
        return json.dumps(kineto_document(events)).encode()

    read = profile_parse([("rank0.json", launched(62))]).ranks[0].events
    assert read is not None and len(read) == 62 and not np.isnan(read.launch).any()
    with pytest.raises(kineto.TooLarge, match="more than 100 GPU activities"):
        profile_parse([("rank0.json", launched(63))])


def test_a_trace_out_of_time_order_counts_its_sorted_copy_against_the_limit(monkeypatch) -> None:
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 16)
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 100)

    def kernels(count: int, swap: bool) -> bytes:
        starts = [float(i) for i in range(count)]
        if swap:  # two neighbours in different packed chunks out of order
            starts[16], starts[17] = starts[17], starts[16]
        events = [kineto_event(f"k{i % 5}", "kernel", t, 0.5, correlation=i) for i, t in enumerate(starts)]
        return json.dumps(kineto_document(events)).encode()

    # In order, 60 count 60; out of order an activity counts 2.2: 45 count 99, 46 count 101.2.
    assert len(profile_parse([("rank0.json", kernels(60, False))]).ranks[0].events) == 60
    assert len(profile_parse([("rank0.json", kernels(45, True))]).ranks[0].events) == 45
    with pytest.raises(kineto.TooLarge, match="more than 100 GPU activities"):
        profile_parse([("rank0.json", kernels(46, True))])


@pytest.mark.parametrize("size", [0, 1, 2, 15, 16, 17, 33, 100])
def test_in_time_order_finds_any_decrease_across_chunks(monkeypatch, size: int) -> None:
    monkeypatch.setattr(profile_data, "PACK_CHUNK", 16)
    values = np.arange(size, dtype=np.float64)
    assert profile_data.in_time_order(values)
    for at in range(1, size):
        swapped = values.copy()
        swapped[at - 1], swapped[at] = swapped[at], swapped[at - 1]
        assert not profile_data.in_time_order(swapped), at
