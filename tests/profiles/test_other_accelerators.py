"""Kineto traces from accelerators other than NVIDIA and AMD: their activity is read by what the
trace declares (device processes, ``deviceProperties``), and a trace that names a device is never
called CPU-only. Fixtures are written here, shaped like Gaudi (HPU), TPU and Neuron exports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from accelboard.importers import kineto
from accelboard.profiles.analysis import profile_analyse


def _doc(device: str, events: list[dict[str, Any]], *, meta: list[dict[str, Any]] | None = None) -> bytes:
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device}],
        "traceEvents": [*(meta or []), *events],
    }
    return json.dumps(document).encode()


def _x(name: str, cat: str, ts: float, dur: float, *, pid: Any, tid: Any = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def _process(pid: Any, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


HOST = 4242


def _gaudi() -> bytes:
    """Worked by hand (µs). Host: aten::mm [0, 50]. HPU 0 (pid 7), engine 3: matmul [10, 110] and
    add [200, 210]; engine 4: a DMA host-to-device copy [100, 140] (overlaps the matmul by 10).
    Span 200; busy = |[10,140] ∪ [200,210]| = 140; idle 60."""
    return _doc(
        "GAUDI2",
        [
            _x("aten::mm", "cpu_op", 0, 50, pid=HOST),
            _x("matmul_bf16_fwd", "hpu_op", 10, 100, pid=7, tid=3),
            _x("dma_memcpy_h2d", "DMA", 100, 40, pid=7, tid=4),
            _x("add_fwd_bf16", "hpu_op", 200, 10, pid=7, tid=3),
        ],
        meta=[_process(HOST, "python3 train.py"), _process(7, "HPU 0")],
    )


def test_a_gaudi_trace_reports_its_device_activity_and_adds_up() -> None:
    summary = profile_analyse(kineto.parse([("hpu.json", _gaudi())]))
    rank = summary["ranks"][0]
    assert summary["devices"] == ["GAUDI2"]
    assert rank["span_us"] == 200.0 and rank["busy_us"] == 140.0
    c = rank["categories"]
    assert c["gemm"] == 100.0  # by its name
    assert c["memcpy_other"] == 30.0  # the DMA copy's part not under the matmul
    assert c["other_compute"] == 10.0
    assert c["idle"] == 60.0
    assert sum(c.values()) == rank["span_us"]
    assert rank["kernels"] == 2 and rank["streams"] == 2
    assert summary["verdict"]["kind"] not in ("no-gpu-activity", "no-device-activity")
    assert not any("CPU-only" in w for w in summary["warnings"])
    assert any("device activity read from the categories DMA, hpu_op" in w for w in summary["warnings"])


@pytest.mark.parametrize(
    ("device", "process"),
    [
        ("TPU v4", "/device:TPU:0"),
        ("Trainium2", "NeuronCore 0"),
        ("Intel(R) Data Center GPU Max 1550", "XPU:0"),
    ],
)
def test_device_processes_are_found_by_their_names(device: str, process: str) -> None:
    data = _doc(
        device,
        [_x("fusion.12", "Op", 0, 30, pid="dev"), _x("python step", "Op", 0, 500, pid=HOST)],
        meta=[_process("dev", process), _process(HOST, "python3")],
    )
    rank = profile_analyse(kineto.parse([("t.json", data)]))["ranks"][0]
    assert (
        rank["busy_us"] == 30.0 and rank["kernels"] == 1
    )  # the host's event in the same category is not read
    assert rank["device"] == device


def test_without_process_names_a_declared_device_id_no_host_event_uses_is_the_device() -> None:
    data = _doc(
        "GAUDI2",
        [_x("aten::add", "cpu_op", 0, 5, pid=HOST), _x("tpc_kernel_add", "hpu_op", 10, 4, pid=0, tid=2)],
    )
    rank = profile_analyse(kineto.parse([("t.json", data)]))["ranks"][0]
    assert rank["busy_us"] == 4.0 and rank["kernels"] == 1


def test_a_trace_naming_a_device_without_device_activity_is_not_called_cpu_only() -> None:
    data = _doc(
        "GAUDI2",
        [_x("aten::mm", "cpu_op", 0, 50, pid=HOST), _x("graph_compile", "hpu_graph", 60, 5, pid=HOST)],
        meta=[_process(HOST, "python3"), _process(9, "HPU 0")],
    )
    summary = profile_analyse(kineto.parse([("t.json", data)]))
    assert summary["verdict"]["kind"] == "no-device-activity"
    assert "GAUDI2" in summary["verdict"]["headline"]
    text = " ".join([summary["verdict"]["headline"], *summary["verdict"]["details"], *summary["warnings"]])
    assert "CPU-only" not in text.replace("not a CPU-only", "")
    assert any("names GAUDI2" in w for w in summary["warnings"])


def test_a_cuda_trace_keeps_reading_kernels_only() -> None:
    """Unknown categories on the GPU's process (``cuda_sync``, vendor extras) do not add to a trace
    that has kernels."""
    data = _doc(
        "NVIDIA H100 80GB HBM3",
        [
            {**_x("sgemm", "kernel", 0, 10, pid=0, tid=7), "args": {"device": 0, "stream": 7}},
            _x("cudaDeviceSynchronize", "cuda_sync", 10, 40, pid=0, tid=7),
            _x("vendor_marker", "gpu_extra", 20, 40, pid=0, tid=7),
        ],
        meta=[_process(0, "GPU 0")],
    )
    rank = profile_analyse(kineto.parse([("t.json", data)]))["ranks"][0]
    assert rank["busy_us"] == 10.0 and rank["kernels"] == 1
