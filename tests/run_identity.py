"""Checks that a stored run is what its file says: one result, one run, one name (issue 33, class 5).

Pure (a run as a plain mapping in; a list of problems in words out), so the same check reads the
runs of the test world, of an upload test and of the demo.

What is a problem:

1. **A scenario nobody stated**: the import filled the scenario by default (``field_sources``
   ``workload.scenario`` is ``default``) with anything but "unstated".
2. **An online benchmark stored as Offline**: a serving benchmark (vLLM ``benchmark_serving``,
   llmperf, genai-perf, AIPerf) sends requests to a server; it is never Offline.
3. **An accuracy name from the upload's shape**: an MLPerf Inference accuracy metric not named
   ``accuracy:mlperf:<key>`` (a model folder's or the uploader's model name in it makes one figure
   two series, depending on how the files came).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ONLINE_FORMATS = frozenset({"vllm-serving", "llmperf", "genai-perf", "aiperf"})
MLPERF_ACCURACY = "accuracy:mlperf:"


def run_identity_problems(run: Mapping[str, Any], *, where: str = "") -> list[str]:
    """``run``: ``scenario``, ``source_format``, ``field_sources`` and ``metrics`` (names)."""
    where = where or f"run {run.get('id', '?')}"
    scenario, fmt = run.get("scenario", ""), run.get("source_format", "")
    source = (run.get("field_sources") or {}).get("workload.scenario", "")
    found = []
    if source == "default" and scenario != "unstated":
        found.append(f"{where}: scenario {scenario!r} that no file or uploader stated")
    if fmt in ONLINE_FORMATS and scenario == "offline":
        found.append(f"{where}: a {fmt} result (online serving) stored as Offline")
    if fmt == "mlperf-inference":
        for name in run.get("metrics", ()):
            if name.startswith("accuracy:") and not name.startswith(MLPERF_ACCURACY):
                found.append(f"{where}: MLPerf accuracy {name!r} is not named {MLPERF_ACCURACY}<key>")
    return found


def runs_identity_problems(runs: Iterable[Any]) -> list[str]:
    """The check over stored runs (``BenchmarkRun`` rows, their workload and metric names)."""
    found = []
    for run in runs:
        found += run_identity_problems(
            {
                "id": run.pk,
                "scenario": run.workload.scenario,
                "source_format": run.source_format,
                "field_sources": run.field_sources,
                "metrics": [metric.name for metric in run.metrics.all()],
            }
        )
    return found
