"""Profile import: parse throughput and peak memory on a generated Kineto trace of about 500 MB.

1. Writes a training trace (``accelboard.testing.traces.write_training_trace``: kernels with their
   launches, flow events, an NCCL stream, CPU operators, steps) of ``--mb`` MB of JSON to a
   temporary file, streaming, so writing it needs little memory itself.
2. In a child process (so that its peak resident memory is its own), reads and analyses it the
   way an upload does: ``profile_parse`` (streaming) then ``profile_analyse``. Prints MB/s and peak
   RSS, and checks that the breakdown adds up to the timeline's span.
3. Reference in the same run: ``json.load`` of a ``--reference-mb`` slice of the same kind of trace
   (the whole-document approach, as pandas-based tools start), its MB/s and peak RSS, scaled per MB.

Ends with ``trace_mb_s= peak_rss_mb= ...``; exits 1 unless at least ``TARGET_MB_S`` MB/s with peak
RSS under ``TARGET_RSS_MB`` MB. No database needed.

    .venv/bin/python bench/profiles.py            # ~500 MB, a few minutes on 2 cores
    .venv/bin/python bench/profiles.py --mb 50    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import quick_parse  # noqa: E402

TARGET_MB_S = 30.0
TARGET_RSS_MB = 400.0
# One step of 8 layers writes about 0.092 MB of JSON.
MB_PER_STEP_8_LAYERS = 0.092


def _write(path: Path, mb: float) -> tuple[int, float]:
    from accelboard.testing.traces import write_training_trace

    steps = max(1, round(mb / MB_PER_STEP_8_LAYERS))
    started = time.perf_counter()
    written = write_training_trace(path, steps=steps, layers=8, world_size=8, input_wait_us=200.0)
    return written, time.perf_counter() - started


def _child(mode: str, path: str) -> int:
    """Run in a child: parse and analyse (or json.load); print JSON figures."""
    if mode == "stream":
        from accelboard.importers.profile_registry import profile_parse
        from accelboard.profiles.analysis import profile_analyse

        started = time.perf_counter()
        summary = profile_analyse(profile_parse([(os.path.basename(path), path)]))
        rank = summary["ranks"][0]
        figures = {
            "events": rank["kernels"],
            "kernels": summary["kernels_total"],
            "steps": summary["totals"]["steps"],
            "adds_up": abs(sum(rank["categories"].values()) - rank["span_us"]) <= 1e-6 * rank["span_us"],
            "verdict": summary["verdict"]["kind"],
        }
    else:
        started = time.perf_counter()
        with open(path, "rb") as handle:
            events = json.load(handle)["traceEvents"]
        figures = {"events": len(events)}
    figures["seconds"] = time.perf_counter() - started
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))
    return 0


def _run_child(mode: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child {mode} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=500.0, help="trace size in MB of JSON (default 500)")
    parser.add_argument(
        "--reference-mb", type=float, default=50.0, help="json.load reference size (default 50)"
    )
    parser.add_argument("--keep", help="write the trace here and keep it (for other tools)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = quick_parse(parser, mb=2.0, reference_mb=1.0)
    if args.child:
        return _child(*args.child)

    with tempfile.TemporaryDirectory(prefix="accelboard-bench-profiles-") as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "rank0.pt.trace.json"
        written, write_s = _write(path, args.mb)
        size_mb = written / 1e6
        print(f"generated {size_mb:.0f} MB trace in {write_s:.0f} s ({path})")
        load = os.getloadavg()
        stream = _run_child("stream", path)
        mb_s = size_mb / stream["seconds"]
        print(
            f"streaming import: {stream['events']:,} kernels, {stream['kernels']} kernel names, "
            f"{stream['steps']} steps in {stream['seconds']:.1f} s = {mb_s:.1f} MB/s, peak RSS "
            f"{stream['peak_rss_mb']:.0f} MB; breakdown adds up: {stream['adds_up']}; verdict {stream['verdict']}"
        )
        reference_path = Path(tmp) / "reference.json"
        ref_written, _ = _write(reference_path, args.reference_mb)
        reference = _run_child("json", reference_path)
        ref_mb = ref_written / 1e6
        ref_mb_s = ref_mb / reference["seconds"]
        ref_rss_per_mb = reference["peak_rss_mb"] / ref_mb
        print(
            f"reference json.load of {ref_mb:.0f} MB: {ref_mb_s:.1f} MB/s, peak RSS {reference['peak_rss_mb']:.0f} MB "
            f"({ref_rss_per_mb:.1f} MB per MB of trace: {ref_rss_per_mb * size_mb:,.0f} MB for this trace)"
        )
    ok = mb_s >= TARGET_MB_S and stream["peak_rss_mb"] < TARGET_RSS_MB and stream["adds_up"]
    print(
        f"trace_mb={size_mb:.0f} trace_mb_s={mb_s:.1f} peak_rss_mb={stream['peak_rss_mb']:.0f} "
        f"reference_json_mb_s={ref_mb_s:.1f} reference_rss_mb_per_mb={ref_rss_per_mb:.1f} "
        f"speed_ratio={mb_s / ref_mb_s:.2f} adds_up={int(stream['adds_up'])} "
        f"load_1m={load[0]:.1f} target_mb_s={TARGET_MB_S:g} target_rss_mb={TARGET_RSS_MB:g} ok={int(ok)}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
