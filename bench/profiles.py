"""Profile import: parse throughput and peak memory on a generated Kineto trace of about 500 MB.

1. Writes a training trace (``accelboard.testing.traces.write_training_trace``: kernels with their
   launches, flow events, an NCCL stream, CPU operators, steps) of ``--mb`` MB of JSON to a
   temporary file, streaming, so writing it needs little memory itself. Its compute kernels get
   ``--distinct-names`` names in turn (``name<i>``, as generated code has): by default every
   kernel a name of its own, far beyond the 10,000 names the importer keeps by name.
2. In a child process (so that its peak resident memory is its own), reads and analyses it the
   way an upload's child process does (``steady_heap`` first: large arrays each in their own
   mapping): ``profile_parse`` (streaming) then ``profile_summary`` (the breakdown and the
   HTA-style analyses). Prints MB/s and peak RSS, and checks that the breakdown adds up to the
   timeline's span. ``--shape lean`` writes kernel events only (about 176 bytes each: 791 MB is
   4.47 million kernels, the most activities per MB, where the event columns dominate memory).
3. As the server reads it (``profiles.services.profile_summarise``, Django set up, no database):
   a trace over 16 MB is read in a forked child; the server process's resident memory before and
   after says what it keeps (``server_kept_mb``), the child's peak what it needed.
4. References in the same run: ``json.load`` of a ``--reference-mb`` slice of the same kind of
   trace (the whole-document approach, as pandas-based tools start), its MB/s and peak RSS, scaled
   per MB; and Holistic Trace Analysis (HTA: ``TraceAnalysis`` + ``get_temporal_breakdown``) on a
   ``--hta-mb`` slice where it is installed (``--hta-python``, or ``$ACCELBOARD_HTA_PYTHON``, an
   interpreter that imports ``hta``; it is not a dependency of the project), else skipped. HTA
   0.5 needs pandas < 3 (with pandas 3 it fails on traces of more than 32,767 GPU events):
   ``python -m venv /tmp/hta && /tmp/hta/bin/pip install HolisticTraceAnalysis "pandas<3"``.

Ends with ``trace_mb_s= peak_rss_mb= server_child_peak_mb= ...``; exits 1 unless at least
``TARGET_MB_S`` MB/s with peak RSS at most ``TARGET_RSS_MB`` MB (the bare reading's and the
server's reading child's) and the breakdown adding up. No database needed.

    .venv/bin/python bench/profiles.py            # ~500 MB, several minutes on 2 cores
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
TARGET_RSS_MB = 300.0
# One step of 8 layers writes about 0.092 MB of JSON (0.0874 MB with a name per kernel).
MB_PER_STEP_8_LAYERS = 0.092
MB_PER_STEP_8_LAYERS_NAMED = 0.0874


def _write(path: Path, mb: float, distinct_names: int, shape: str = "training") -> tuple[int, float]:
    from accelboard.testing.traces import write_training_trace

    if shape == "lean":
        return _write_lean(path, mb, distinct_names)
    steps = max(1, round(mb / (MB_PER_STEP_8_LAYERS_NAMED if distinct_names else MB_PER_STEP_8_LAYERS)))
    started = time.perf_counter()
    written = write_training_trace(
        path, steps=steps, layers=8, world_size=8, input_wait_us=200.0, distinct_names=distinct_names
    )
    return written, time.perf_counter() - started


def _write_lean(path: Path, mb: float, distinct_names: int) -> tuple[int, float]:
    """Kernel events only, about 130 bytes each (no launches, flows, CPU operators or steps): the
    most GPU activities per MB, as in a trace of millions of tiny kernels."""
    started = time.perf_counter()
    written = 0
    with open(path, "w") as handle:
        handle.write('{"schemaVersion": 1, "traceEvents": [\n')
        at, index, chunk = 1_000_000.0, 0, []
        while written < mb * 1e6:
            for _ in range(10_000):
                chunk.append(
                    f'{{"ph": "X", "cat": "kernel", "name": "triton_poi_fused_{index % distinct_names}", '
                    f'"pid": 0, "tid": 7, "ts": {at:.3f}, "dur": 3.5, '
                    f'"args": {{"device": 0, "stream": 7, "correlation": {index}}}}}'
                )
                at += 5.25
                index += 1
            text = ",\n".join(chunk)
            handle.write(("" if written == 0 else ",\n") + text)
            written += len(text) + 2
            chunk.clear()
        handle.write("\n]}\n")
    return path.stat().st_size, time.perf_counter() - started


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


HTA_SCRIPT = """
import json, resource, sys, time
from hta.trace_analysis import TraceAnalysis
started = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
breakdown = analyzer.get_temporal_breakdown(visualize=False)
print(json.dumps({"seconds": time.perf_counter() - started,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ranks": int(len(breakdown))}))
"""


def _hta_python(given: str | None) -> str | None:
    """An interpreter that imports HTA (given, $ACCELBOARD_HTA_PYTHON, or this one), or None."""
    for candidate in (given, os.environ.get("ACCELBOARD_HTA_PYTHON"), sys.executable):
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import hta.trace_analysis"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return candidate
    return None


def _child(mode: str, path: str) -> int:
    """Run in a child: parse and analyse (or json.load); print JSON figures."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_started = usage.ru_utime + usage.ru_stime
    if mode == "stream":
        from accelboard.importers.profile_data import steady_heap
        from accelboard.importers.profile_registry import profile_parse
        from accelboard.profiles.hta import profile_summary

        steady_heap()  # as the server's child that reads an upload does
        started = time.perf_counter()
        summary = profile_summary(profile_parse([(os.path.basename(path), path)]))
        rank = summary["ranks"][0]
        figures = {
            "events": rank["kernels"],
            "kernels": summary["kernels_total"],
            "steps": summary["totals"]["steps"],
            "adds_up": abs(sum(rank["categories"].values()) - rank["span_us"]) <= 1e-6 * rank["span_us"],
            "verdict": summary["verdict"]["kind"],
            "rss_after_mb": _rss_now_mb(),
        }
    elif mode == "server":
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
        django.setup()
        from accelboard.profiles import services

        import_rss = _rss_now_mb()
        started = time.perf_counter()
        summary = services.profile_summarise(files=[(os.path.basename(path), path)])
        figures = {
            "in_child": os.path.getsize(path) > services.CHILD_PROCESS_BYTES,
            "rss_before_mb": import_rss,
            "rss_after_mb": _rss_now_mb(),
            "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "kernels": summary["kernels_total"],
        }
    else:
        started = time.perf_counter()
        with open(path, "rb") as handle:
            events = json.load(handle)["traceEvents"]
        figures = {"events": len(events)}
    figures["seconds"] = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures["cpu_seconds"] = usage.ru_utime + usage.ru_stime - cpu_started
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
        "--distinct-names",
        type=int,
        default=10_000_000,
        help="distinct compute kernel names, used in turn (default 10,000,000: every kernel its own)",
    )
    parser.add_argument(
        "--shape",
        choices=("training", "lean"),
        default="training",
        help="training: kernels with launches, flows, CPU operators, steps (default); "
        "lean: kernel events only (millions of tiny kernels)",
    )
    parser.add_argument(
        "--reference-mb", type=float, default=50.0, help="json.load reference size (default 50)"
    )
    parser.add_argument("--hta-mb", type=float, default=20.0, help="HTA reference size (default 20)")
    parser.add_argument("--hta-python", help="a Python that imports hta (default: $ACCELBOARD_HTA_PYTHON)")
    parser.add_argument("--keep", help="write the trace here and keep it (for other tools)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = quick_parse(parser, mb=2.0, reference_mb=1.0, hta_mb=1.0)
    if args.child:
        return _child(*args.child)

    with tempfile.TemporaryDirectory(prefix="accelboard-bench-profiles-") as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "rank0.pt.trace.json"
        written, write_s = _write(path, args.mb, args.distinct_names, args.shape)
        size_mb = written / 1e6
        print(f"generated {size_mb:.0f} MB trace in {write_s:.0f} s ({path})")
        load = os.getloadavg()
        stream = _run_child("stream", path)
        mb_s = size_mb / stream["seconds"]
        # On a shared machine the wall time depends on the others' load; the CPU time much less.
        cpu_mb_s = size_mb / max(stream["cpu_seconds"], 1e-9)
        print(
            f"streaming import: {stream['events']:,} kernels, {stream['kernels']:,} kernel rows, "
            f"{stream['steps']} steps in {stream['seconds']:.1f} s = {mb_s:.1f} MB/s "
            f"({stream['cpu_seconds']:.1f} s of CPU: {cpu_mb_s:.1f} MB per CPU second), peak RSS "
            f"{stream['peak_rss_mb']:.0f} MB (after: {stream['rss_after_mb']:.0f} MB held in the same process); "
            f"breakdown adds up: {stream['adds_up']}; verdict {stream['verdict']}"
        )
        server = _run_child("server", path)
        kept = server["rss_after_mb"] - server["rss_before_mb"]
        print(
            f"as the server reads it (in a child process: {server['in_child']}): server process "
            f"{server['rss_before_mb']:.0f} MB before, {server['rss_after_mb']:.0f} MB after (kept {kept:+.0f} MB); "
            f"child peak {server['child_peak_rss_mb']:.0f} MB (Django loaded)"
        )
        reference_path = Path(tmp) / "reference" / "rank0.pt.trace.json"
        reference_path.parent.mkdir()
        ref_written, _ = _write(reference_path, args.reference_mb, args.distinct_names, args.shape)
        reference = _run_child("json", reference_path)
        ref_mb = ref_written / 1e6
        ref_mb_s = ref_mb / reference["seconds"]
        ref_rss_per_mb = reference["peak_rss_mb"] / ref_mb
        print(
            f"reference json.load of {ref_mb:.0f} MB: {ref_mb_s:.1f} MB/s, peak RSS {reference['peak_rss_mb']:.0f} MB "
            f"({ref_rss_per_mb:.1f} MB per MB of trace: {ref_rss_per_mb * size_mb:,.0f} MB for this trace)"
        )
        hta = _hta(args, Path(tmp))
    # Both the bare reading's peak and the server's reading child's (which counts the server's
    # own pages, Django's, that it shares) must stay under the target.
    child_mb = server["child_peak_rss_mb"]
    ok = mb_s >= TARGET_MB_S and max(stream["peak_rss_mb"], child_mb) <= TARGET_RSS_MB and stream["adds_up"]
    hta_figures = (
        f"hta_mb={hta['mb']:.0f} hta_mb_s={hta['mb_s']:.2f} hta_rss_mb={hta['peak_rss_mb']:.0f}"
        if hta
        else "hta=skipped"
    )
    print(
        f"trace_mb={size_mb:.0f} trace_mb_s={mb_s:.1f} trace_mb_per_cpu_s={cpu_mb_s:.1f} peak_rss_mb={stream['peak_rss_mb']:.0f} "
        f"server_child_peak_mb={child_mb:.0f} server_kept_mb={kept:.0f} reference_json_mb_s={ref_mb_s:.1f} reference_rss_mb_per_mb={ref_rss_per_mb:.1f} "
        f"speed_ratio={mb_s / ref_mb_s:.2f} {hta_figures} adds_up={int(stream['adds_up'])} "
        f"load_1m={load[0]:.1f} target_mb_s={TARGET_MB_S:g} target_rss_mb={TARGET_RSS_MB:g} ok={int(ok)}"
    )
    return 0 if ok else 1


def _hta(args: argparse.Namespace, tmp: Path) -> dict | None:
    """HTA's figures on a ``--hta-mb`` trace of the same kind, or None (printed why) where it is absent."""
    python = _hta_python(args.hta_python)
    if python is None:
        print("HTA: not installed here (pass --hta-python or set ACCELBOARD_HTA_PYTHON): skipped")
        return None
    done = None
    # HTA stores name ids as int16: beyond 32,767 distinct names it fails; then plain names.
    for attempt, names in enumerate((args.distinct_names, 0)):
        folder = tmp / f"hta{attempt}"
        folder.mkdir()
        written, _ = _write(folder / "rank0.pt.trace.json", args.hta_mb, names, args.shape)
        done = subprocess.run(
            [python, "-c", HTA_SCRIPT, str(folder)], capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            break
        why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        print(f"HTA: failed on the trace with {names or 'the usual'} distinct names: {why[0][:160]}")
    if done is None or done.returncode != 0:
        print("HTA: skipped")
        return None
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    mb = written / 1e6
    figures.update(mb=mb, mb_s=mb / figures["seconds"])
    print(
        f"HTA ({python}) load + temporal breakdown of {mb:.0f} MB: {figures['mb_s']:.2f} MB/s, "
        f"peak RSS {figures['peak_rss_mb']:.0f} MB ({figures['peak_rss_mb'] / mb:.1f} MB per MB of trace)"
    )
    return figures


if __name__ == "__main__":
    sys.exit(main())
