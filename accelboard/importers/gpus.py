"""Which GPUs of a host log did the work: figures describe those, never an average with idle ones.

nvidia-smi and DCGM sample every GPU of the host, also those the benchmark never touched. An idle
GPU averaged with a busy one halves the utilisation and the power of the run and doubles its GPU
count, so run-level figures are built from the busy GPUs only:

1. A GPU is busy when its utilisation is known and exceeds ``BUSY_UTIL_PCT`` at least once; a GPU
   whose utilisation is never known is counted too (nothing says it was idle).
2. When no GPU was busy (an idle host) or no utilisation was logged, every GPU counts.
3. Power and energy of the busy GPUs are **summed** (the run's draw, like MLPerf's wall power and
   CodeCarbon's GPU power), utilisation is the mean of the per-GPU means, memory and temperature
   are per-GPU peaks. Each GPU's own figures stay in the run's context.
Limits: a benchmark that keeps a GPU under 5 % throughout (a tiny model on a huge GPU) reads as
idle; the uploader can state ``count`` in the context.
"""

from __future__ import annotations

BUSY_UTIL_PCT = 5.0


def busy_gpus(max_util: dict[str, float | None]) -> tuple[list[str], list[str]]:
    """(busy GPU keys, idle GPU keys) from each GPU's peak utilisation (None: never known)."""
    known = {key: value for key, value in max_util.items() if value is not None}
    busy = [key for key in max_util if key not in known or known[key] > BUSY_UTIL_PCT]
    idle = [key for key in max_util if key not in busy]
    if not known or len(busy) == len(max_util) or not any(v > BUSY_UTIL_PCT for v in known.values()):
        return list(max_util), []
    return busy, idle
