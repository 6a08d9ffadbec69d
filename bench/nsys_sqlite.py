"""Nsight Systems SQLite import: rows per second and peak memory on a generated export.

1. Writes an export (``accelboard.testing.nsys_export.write_export``) with ``--kernels`` kernels
   over ``--names`` distinct kernel names, each with its ``cudaLaunchKernel`` runtime row.
2. In a child process (so that its peak resident memory is its own), reads and analyses it the
   way an upload does: ``profile_parse`` then ``profile_analyse``; checks that the kernel count is
   the one written and that the categories and idle add up to the span.
3. Reference in the same run, in another child before and after: the same rows fetched with the
   ``sqlite3`` module and thrown away (the floor for any importer written with it). The ratio is
   the import's time (without the analysis) over the reference's mean.

Ends with ``rows_s= ratio= peak_rss_mb= ...``; exits 1 when the ratio is over ``TARGET_RATIO`` or
peak RSS over ``TARGET_RSS_MB``. No database needed.

    .venv/bin/python bench/nsys_sqlite.py                  # 1M kernels (about 85 MB), a minute
    .venv/bin/python bench/nsys_sqlite.py --kernels 100000 # a quick look
    .venv/bin/python bench/nsys_sqlite.py --quick          # the smallest run (tests/test_benches.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import quick_parse  # noqa: E402

TARGET_RATIO = 4.0
TARGET_RSS_MB = 300.0


def _child(mode: str, path: str) -> int:
    """Run in a child: import and analyse (or the plain fetch); print JSON figures."""
    started = time.perf_counter()
    figures: dict[str, float | bool] = {}
    if mode == "import":
        from accelboard.importers.profile_registry import profile_parse
        from accelboard.profiles.analysis import profile_analyse

        data = profile_parse([(os.path.basename(path), path)])
        figures["parse_seconds"] = time.perf_counter() - started
        summary = profile_analyse(data)
        totals = summary["totals"]
        figures["kernels"] = totals["kernels"]
        figures["adds_up"] = (
            abs(sum(totals["categories"].values()) - totals["span_us"]) < 1e-6 * totals["span_us"]
        )
    else:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for sql in (
            "SELECT start, end, deviceId, streamId, correlationId, globalPid, demangledName "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL",
            "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        ):
            cursor = db.execute(sql)
            while cursor.fetchmany(10_000):
                pass
        db.close()
    figures["seconds"] = time.perf_counter() - started
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))
    return 0


def _run_child(mode: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1_000_000, help="kernels in the export (default 1M)")
    parser.add_argument("--names", type=int, default=100_000, help="distinct kernel names (default 100k)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = quick_parse(parser, kernels=2_000, names=200)
    if args.child:
        return _child(*args.child)
    from accelboard.testing.nsys_export import write_export

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.sqlite"
        started = time.perf_counter()
        write_export(path, kernels=args.kernels, names=args.names)
        size_mb = path.stat().st_size / 1e6
        print(
            f"wrote a {size_mb:.0f} MB export ({args.kernels} kernels) in {time.perf_counter() - started:.0f} s"
        )
        # The reference before and after the import: the machine's load moves between them.
        before = _run_child("fetch", path)
        imported = _run_child("import", path)
        after = _run_child("fetch", path)
    reference_s = (before["seconds"] + after["seconds"]) / 2
    rows = 2 * args.kernels
    rows_s = rows / imported["seconds"]
    ratio = imported["parse_seconds"] / reference_s
    print(
        f"import and analysis: {imported['seconds']:.1f} s (import {imported['parse_seconds']:.1f} s), "
        f"{rows_s:,.0f} rows/s, {size_mb / imported['seconds']:.1f} MB/s, peak RSS {imported['peak_rss_mb']:.0f} MB"
    )
    print(
        f"reference (the same rows fetched with sqlite3): {before['seconds']:.1f} s before, "
        f"{after['seconds']:.1f} s after, peak RSS {before['peak_rss_mb']:.0f} MB; import / reference = {ratio:.2f}"
    )
    ok = True
    if imported["kernels"] != args.kernels + 3 or not imported["adds_up"]:
        print(
            f"WRONG: kernels {imported['kernels']} (wrote {args.kernels + 3}), adds up: {imported['adds_up']}"
        )
        ok = False
    if ratio > TARGET_RATIO or imported["peak_rss_mb"] > TARGET_RSS_MB:
        print(
            f"MISSED: ratio {ratio:.2f} (target <= {TARGET_RATIO}), peak RSS (target <= {TARGET_RSS_MB:.0f} MB)"
        )
        ok = False
    print(
        f"rows_s={rows_s:.0f} mb_s={size_mb / imported['seconds']:.1f} ratio={ratio:.2f} "
        f"peak_rss_mb={imported['peak_rss_mb']:.0f} export_mb={size_mb:.0f}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
