"""Generated PyTorch profiler (Kineto) traces for tests, the browser walk and the benchmark.

``kineto_event`` and ``kineto_document`` build small hand-made traces whose figures a test can
work out by hand; ``write_training_trace`` streams a realistic one of any size to disk (training
steps: an input copy, forward and backward kernels with their launches, an NCCL all-reduce on a
second stream overlapping the backward pass, CPU operators, flow events and metadata, laid out
as ``tensorboard_trace_handler`` writes them), deterministic for a seed. ``slow`` scales named
kernels' durations, to make a "before and after" pair of the same model.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

KERNELS = (
    # name, category it must be classified as, mean duration (µs)
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", 180.0),
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)",
        "attention",
        140.0,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}>(int, at::native::GeluCUDAKernelImpl)",
        "elementwise",
        22.0,
    ),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*)",
        "elementwise",
        15.0,
    ),
    ("ampere_sgemm_128x64_tn", "gemm", 60.0),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>(at::native::ReduceOp<float>)",
        "elementwise",
        6.0,
    ),
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def kineto_event(
    name: str,
    cat: str,
    ts: float,
    dur: float,
    *,
    stream: int = 7,
    correlation: int | None = None,
    device: int = 0,
    pid: int | str = 0,
    tid: int | str | None = None,
) -> dict[str, Any]:
    """One complete ("X") event; GPU categories get device/stream/correlation args."""
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid}
    if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
        event["tid"] = stream if tid is None else tid
        event["args"] = {"device": device, "stream": stream}
        if correlation is not None:
            event["args"]["correlation"] = correlation
    else:
        event["tid"] = 1 if tid is None else tid
        event["args"] = {} if correlation is None else {"correlation": correlation}
    return event


def kineto_document(
    events: list[dict[str, Any]],
    *,
    rank: int | None = 0,
    world_size: int = 1,
    device: str = "NVIDIA H100 80GB HBM3",
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device, "computeMajor": 9, "computeMinor": 0}],
    }
    if rank is not None:
        document["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    document["traceEvents"] = events
    document["traceName"] = f"rank{rank}.pt.trace.json"
    return document


def write_document(path: Path, document: dict[str, Any]) -> Path:
    data = json.dumps(document, indent=1).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def _training_events(
    *,
    steps: int,
    layers: int,
    rank: int,
    seed: int,
    slow: dict[str, float],
    input_wait_us: float,
    distinct_names: int = 0,
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed * 1000 + rank)
    launched = 0
    pid, cpu_tid = 4242 + rank, 4243 + rank
    cpu = gpu = 1_000_000.0 + rank * 3.0
    correlation = 1
    external = 1
    yield {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}
    yield {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}
    yield {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}
    for step in range(1, steps + 1):
        step_start = cpu
        cpu += input_wait_us * (0.8 + 0.4 * rng.random())  # the data loader
        # The batch goes to the GPU.
        gpu = max(gpu, cpu + 5.0)
        yield from _launch(
            "Memcpy HtoD (Pinned -> Device)",
            "gpu_memcpy",
            cpu,
            gpu,
            40.0,
            correlation,
            pid,
            cpu_tid,
            external,
            7,
        )
        gpu += 40.0
        cpu += 8.0
        correlation += 1
        external += 1
        for phase in ("forward", "backward"):
            for layer in range(layers):
                op_start = cpu
                for name, _category, mean in KERNELS:
                    if phase == "forward" and name.startswith("ampere_sgemm"):
                        continue
                    dur = (
                        mean
                        * slow.get(name, 1.0)
                        * (0.9 + 0.2 * rng.random())
                        * (2.0 if phase == "backward" else 1.0)
                    )
                    cpu += 4.0 + rng.random()
                    start = max(gpu + 1.0, cpu + 6.0)
                    label = name
                    if distinct_names:  # generated code: one name per shape (Triton, CUTLASS templates)
                        label = f"{name}<{launched % distinct_names}>"
                        launched += 1
                    yield from _launch(
                        label, "kernel", cpu, start, dur, correlation, pid, cpu_tid, external, 7
                    )
                    gpu = start + dur
                    correlation += 1
                    external += 1
                yield {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"aten::{phase}_layer{layer % 4}",
                    "pid": pid,
                    "tid": cpu_tid,
                    "ts": op_start,
                    "dur": cpu - op_start + 1.0,
                    "args": {"External id": external, "Sequence number": layer},
                }
                if phase == "backward" and layer % 2 == 1:
                    # Gradient bucket all-reduce on the NCCL stream, overlapping later backward kernels.
                    cpu += 3.0
                    dur = 250.0 * slow.get(NCCL, 1.0) * (0.9 + 0.2 * rng.random())
                    yield from _launch(
                        NCCL,
                        "kernel",
                        cpu,
                        max(gpu - 50.0, cpu + 6.0),
                        dur,
                        correlation,
                        pid,
                        cpu_tid,
                        external,
                        20,
                    )
                    correlation += 1
                    external += 1
        yield {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{step}",
            "pid": pid,
            "tid": cpu_tid,
            "ts": step_start,
            "dur": cpu - step_start + 2.0,
            "args": {"External id": external},
        }
        external += 1
        cpu += 2.0
    yield {
        "ph": "i",
        "name": "Iteration Start: PyTorch Profiler",
        "pid": "Traces",
        "tid": "Trace PyTorch Profiler",
        "ts": 1_000_000.0,
        "s": "g",
    }


def _launch(
    name: str,
    cat: str,
    cpu: float,
    start: float,
    dur: float,
    correlation: int,
    pid: int,
    tid: int,
    external: int,
    stream: int,
) -> Iterator[dict[str, Any]]:
    api = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
    yield {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": api,
        "pid": pid,
        "tid": tid,
        "ts": round(cpu, 3),
        "dur": 3.5,
        "args": {"External id": external, "cbid": 211, "correlation": correlation},
    }
    yield {
        "ph": "s",
        "id": correlation,
        "pid": pid,
        "tid": tid,
        "ts": round(cpu, 3),
        "cat": "ac2g",
        "name": "ac2g",
    }
    args: dict[str, Any] = {
        "External id": external,
        "queued": 0,
        "device": 0,
        "context": 1,
        "stream": stream,
        "correlation": correlation,
        "registers per thread": 128,
        "shared memory": 49152,
        "blocks per SM": 2.5,
        "warps per SM": 10.0,
        "grid": [264, 1, 1],
        "block": [256, 1, 1],
        "est. achieved occupancy %": 25,
    }
    if cat == "gpu_memcpy":
        args = {
            "External id": external,
            "device": 0,
            "context": 1,
            "stream": stream,
            "correlation": correlation,
            "bytes": 4194304,
            "memory bandwidth (GB/s)": 104.8,
        }
    yield {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": round(start, 3),
        "dur": round(dur, 3),
        "args": args,
    }
    yield {
        "ph": "f",
        "id": correlation,
        "pid": 0,
        "tid": stream,
        "ts": round(start, 3),
        "cat": "ac2g",
        "name": "ac2g",
        "bp": "e",
    }


def write_training_trace(
    target: Path | IO[bytes],
    *,
    steps: int = 3,
    layers: int = 4,
    rank: int = 0,
    world_size: int = 1,
    seed: int = 1,
    slow: dict[str, float] | None = None,
    input_wait_us: float = 300.0,
    device: str = "NVIDIA H100 80GB HBM3",
    distinct_names: int = 0,
) -> int:
    """Stream a generated training trace to ``target`` (gzip when the path ends in .gz); the bytes of
    JSON written. Memory stays small whatever ``steps × layers``. ``distinct_names``: give the
    compute kernels that many distinct names in turn (``name<i>``), as generated code does."""
    raw: IO[bytes] | gzip.GzipFile
    if isinstance(target, Path):
        gz = target.name.endswith(".gz")
        raw = gzip.open(target, "wb", compresslevel=3) if gz else open(target, "wb")  # noqa: SIM115
        close = True
    else:
        raw, close = target, False
    written = 0

    def put(text: str) -> None:
        nonlocal written
        data = text.encode()
        written += len(data)
        raw.write(data)

    try:
        head = {
            "schemaVersion": 1,
            "deviceProperties": [
                {
                    "id": 0,
                    "name": device,
                    "totalGlobalMem": 85899345920,
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "numSms": 132,
                }
            ],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
        }
        put("{\n" + json.dumps(head)[1:-1] + ',\n  "traceEvents": [\n')
        first = True
        buffer: list[str] = []
        for event in _training_events(
            steps=steps,
            layers=layers,
            rank=rank,
            seed=seed,
            slow=slow or {},
            input_wait_us=input_wait_us,
            distinct_names=distinct_names,
        ):
            buffer.append(("  " if first else ",\n  ") + json.dumps(event))
            first = False
            if len(buffer) >= 2000:
                put("".join(buffer))
                buffer.clear()
        put("".join(buffer))
        put(f'\n  ],\n  "traceName": "rank{rank}.pt.trace.json",\n  "displayTimeUnit": "ms"\n}}\n')
    finally:
        if close:
            raw.close()
    return written
