"""Generated Nsight Systems SQLite exports (``nsys export --type sqlite``) for tests and the bench.

The tables and columns are those of a real export (nsys 2026.1, schema 3.24), fewer columns
where the importer reads none. ``write_export`` writes a small one whose figures are worked out
by hand in its docstring; ``kernels=N`` appends N more kernels (and their launches) after it,
deterministic for a seed, for the benchmark.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

GPU = "NVIDIA H100 80GB HBM3"
GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(T1::Params)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *, unsigned long, ncclWork *)"
ADD = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>>(int, T2, T3)"
)

_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
    totalMemory INTEGER, smCount INTEGER, chipName TEXT, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    gridX INTEGER NOT NULL, blockX INTEGER NOT NULL, registersPerThread INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
    bytes INTEGER NOT NULL, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
    returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
"""

# A serialized GlobalId: the process id in bits 24-47, the thread id in bits 0-23 (plus VM bits).
_VM = 1 << 48


def _pid(pid: int) -> int:
    return _VM | pid << 24


def _tid(pid: int, tid: int) -> int:
    return _VM | pid << 24 | tid


def write_export(
    path: Path, *, second_gpu: bool = False, kernels: int = 0, names: int = 1000, seed: int = 0
) -> Path:
    """One process (pid 100) on GPU 0, times in ns. By hand, in µs from 1000:

    - stream 7: gemm 1000-1100 (launched at 990), H2D copy 1300-1310 (launched at 1250),
      memset 1310-1315 (launched at 1100.5), elementwise add 1400-1420 (launched at 1280);
    - stream 20: NCCL all-reduce 1050-1200 (launched at 996).

    Span 420; busy = [1000, 1200] + [1300, 1315] + [1400, 1420] = 235; idle 185: the gap
    1200-1300 waits on the host (its next activity was launched at 1250, after the gap began),
    1315-1400 waits on something else (the add was launched at 1280, before). Compute: gemm 100,
    add 20; communication exposed 100 (1100-1200), overlapped 50 (1050-1100); memcpy_htod 10,
    memset 5. 100 + 20 + 100 + 10 + 5 + 185 = 420. Kernels: 3, 270 µs. Launches: 3 calls of
    5, 3 and 4 µs. NVTX: step 1 from 980 to 1290, a "forward" range of 115 µs.

    With ``second_gpu``: process 200 on GPU 1 runs one gemm 2000-2300 (its own rank). With
    ``kernels``: that many more on GPU 0 from 3000 µs on, over ``names`` distinct names.
    """
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    strings = {
        1: GEMM,
        2: "Kernel2",
        3: NCCL,
        4: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
        5: ADD,
        6: "vectorized_elementwise_kernel",
        10: "cudaLaunchKernel_v7000",
        11: "cudaMemcpyAsync_v3020",
        12: "cudaMemsetAsync_v3020",
        13: "cudaStreamSynchronize_v3020",
        20: "ProfilerStep#1",
    }
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.items())
    db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems')")
    gpus = [(_VM, 0, GPU, "0000:18:00.0", 85520809984, 132, "GH100", 9, 0)]
    if second_gpu:
        gpus.append((_VM, 1, GPU, "0000:2a:00.0", 85520809984, 132, "GH100", 9, 0))
    db.executemany("INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", gpus)
    db.executemany(
        "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
        [(1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"), (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host")],
    )
    pid, tid = _pid(100), _tid(100, 101)
    kernel_rows = [
        (1_000_000, 1_100_000, 0, 1, None, 7, 10, pid, 1, 2, None, 132, 256, 128),
        (1_050_000, 1_200_000, 0, 1, None, 20, 11, pid, 3, 4, None, 8, 512, 96),
        (1_400_000, 1_420_000, 0, 1, None, 7, 14, pid, 5, 6, None, 1024, 128, 16),
    ]
    runtime = [
        (990_000, 995_000, 1, tid, 10, 10, 0, None),
        (996_000, 999_000, 1, tid, 11, 10, 0, None),
        (1_100_500, 1_101_000, 1, tid, 13, 12, 0, None),
        (1_250_000, 1_252_000, 1, tid, 12, 11, 0, None),
        (1_280_000, 1_284_000, 1, tid, 14, 10, 0, None),
        (1_284_000, 1_420_500, 1, tid, 15, 13, 0, None),
    ]
    if second_gpu:
        kernel_rows.append((2_000_000, 2_300_000, 1, 2, None, 7, 10, _pid(200), 1, 2, None, 132, 256, 128))
        runtime.append((1_990_000, 1_991_000, 1, _tid(200, 201), 10, 10, 0, None))
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * 14)})", kernel_rows)
    db.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1300000, 1310000, 0, 1, NULL, 7, 12, ?, 4194304, 1, 0, 2)",
        (pid,),
    )
    db.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (1310000, 1315000, 0, 1, NULL, 7, 13, ?, 0, 1048576, 2)",
        (pid,),
    )
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({', '.join('?' * 8)})", runtime)
    db.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, NULL, ?, 0)",
        [
            (980_000, 1_290_000, 59, None, tid, 20),  # text through StringIds
            (985_000, 1_100_000, 59, "forward", tid, None),
            (1_000_000, None, 34, "a mark", tid, None),  # a mark: not a range
        ],
    )
    if kernels:
        _more(db, kernels, names, random.Random(seed))
    db.commit()
    db.close()
    return path


def _more(db: sqlite3.Connection, count: int, names: int, rng: random.Random) -> None:
    db.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        ((1000 + i, f"void gen::kernel_{i}<float, {i % 7}>(gen::Params)") for i in range(names)),
    )
    pid, tid = _pid(100), _tid(100, 101)

    def kernels() -> Iterator[tuple[object, ...]]:
        at = 3_000_000
        for i in range(count):
            at += rng.randint(1_000, 8_000)
            end = at + rng.randint(500, 20_000)
            yield (at, end, 0, 1, None, 7 + i % 4, 1000 + i, pid, 1000 + i % names, 2, None, 1, 128, 32)

    def launches() -> Iterator[tuple[object, ...]]:
        for i in range(count):
            at = 2_990_000 + i * 1_000
            yield (at, at + 800, 1, tid, 1000 + i, 10, 0, None)

    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * 14)})", kernels())
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({', '.join('?' * 8)})", launches())
