"""What the host agent costs the host: CPU (% of one core) and RSS while it samples 8 simulated GPUs.

    python bench/agent_overhead.py [--seconds 180] [--gpus 8] [--interval 1] [--strict]

1. Starts a local sink (stdlib HTTP server in this process) that accepts the agent's batches
   and counts the samples, so the sender's work is part of the measurement.
2. Starts ``accelboard-agent run --simulate N`` from this checkout against the sink, and beside
   it a reference: an idle Python interpreter that only sleeps, measured the same way.
3. Every 5 s reads each process' CPU time (utime+stime from /proc/PID/stat) and RSS (VmRSS from
   /proc/PID/status). The first 20% of the run is warm-up (imports, first spool pages): CPU and
   RSS growth are measured from its end.
4. Prints the series, the figures and the ratios against the reference, and ends with
   ``cpu_pct_of_core=… rss_mb=… rss_growth_mb=…``. Targets: <= 1% of a core, <= 50 MB, no
   growth (<= 1 MB); ``--strict`` exits 1 when one is missed.

Simulated GPUs cost the agent a little more Python than NVML calls would (the load curve is
computed in Python), so this is an upper bound for the sampling loop itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common import quick_parse

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
TARGET_CPU_PCT = 1.0
TARGET_RSS_MB = 50.0
TARGET_GROWTH_MB = 1.0


class Sink:
    """Accepts every POST like the server would (200 + the batch id) and counts samples."""

    def __init__(self) -> None:
        self.samples = 0
        self.batches = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                body = json.loads(raw)
                sink.batches += 1
                sink.samples += len(body.get("samples") or [])
                data = json.dumps(
                    {"batch_id": body.get("batch_id"), "accepted": 1, "duplicate": False}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        # The command name may contain spaces: fields start after its closing parenthesis.
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for {pid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="measured run length (default 180)")
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs (default 8)")
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval, s (default 1)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = quick_parse(parser, seconds=10.0, gpus=1)
    if args.seconds < 10:
        parser.error("--seconds: at least 10")

    sink = Sink()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "agents"), env.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "accelboard_agent",
                "run",
                "--simulate",
                str(args.gpus),
                "--interval",
                str(args.interval),
                "--server",
                sink.url,
                "--token",
                "overhead",
                "--spool",
                os.path.join(tmp, "spool.db"),
                "--hostname",
                "overhead-bench",
            ],  # fmt: skip
            env=env,
        )
        reference = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"],
        )
        pids = {"agent": agent.pid, "reference": reference.pid}
        rows = []
        started = time.monotonic()
        try:
            while True:
                elapsed = time.monotonic() - started
                if agent.poll() is not None:
                    print(f"the agent exited early with status {agent.returncode}", file=sys.stderr)
                    return 1
                rows.append(
                    {
                        "t": elapsed,
                        **{f"{name}_cpu": cpu_seconds(pid) for name, pid in pids.items()},
                        **{f"{name}_rss": rss_mb(pid) for name, pid in pids.items()},
                    }
                )
                if elapsed >= args.seconds:
                    break
                time.sleep(min(5.0, args.seconds - elapsed + 0.01))
        finally:
            for process in (agent, reference):
                process.send_signal(signal.SIGTERM)
            stop_started = time.monotonic()
            agent_code = agent.wait(timeout=10)
            stop_s = time.monotonic() - stop_started
            reference.wait(timeout=10)

    warm = next(row for row in rows if row["t"] >= 0.2 * args.seconds)
    last = rows[-1]
    span = last["t"] - warm["t"]
    print(f"{'t_s':>7} {'agent_cpu_s':>12} {'agent_rss_mb':>13} {'ref_cpu_s':>10} {'ref_rss_mb':>11}")
    for row in rows:
        print(
            f"{row['t']:7.1f} {row['agent_cpu']:12.2f} {row['agent_rss']:13.1f} "
            f"{row['reference_cpu']:10.2f} {row['reference_rss']:11.1f}"
        )
    cpu_pct = 100.0 * (last["agent_cpu"] - warm["agent_cpu"]) / span
    ref_cpu_pct = 100.0 * (last["reference_cpu"] - warm["reference_cpu"]) / span
    rss = max(row["agent_rss"] for row in rows)
    growth = last["agent_rss"] - warm["agent_rss"]
    ref_rss = max(row["reference_rss"] for row in rows)
    expected = int(args.gpus * args.seconds / args.interval)
    print()
    print(
        f"simulated GPUs: {args.gpus} at {1 / args.interval:g} Hz for {args.seconds:g} s (warm-up {warm['t']:.0f} s)"
    )
    print(f"sink received: {sink.samples} samples in {sink.batches} batches (about {expected} sampled)")
    print(f"agent stop on SIGTERM: exit {agent_code} in {stop_s:.2f} s")
    print(
        f"agent:     cpu {cpu_pct:.3f}% of one core, rss peak {rss:.1f} MB, growth after warm-up {growth:+.2f} MB"
    )
    print(
        f"reference: cpu {ref_cpu_pct:.3f}% of one core, rss peak {ref_rss:.1f} MB (an idle python, same run)"
    )
    print(f"ratio agent/reference: rss {rss / ref_rss:.2f}x, cpu +{cpu_pct - ref_cpu_pct:.3f} points")
    missed = []
    if cpu_pct > TARGET_CPU_PCT:
        missed.append(f"cpu {cpu_pct:.2f}% > {TARGET_CPU_PCT}%")
    if rss > TARGET_RSS_MB:
        missed.append(f"rss {rss:.1f} MB > {TARGET_RSS_MB} MB")
    if growth > TARGET_GROWTH_MB:
        missed.append(f"rss growth {growth:.2f} MB > {TARGET_GROWTH_MB} MB")
    print("targets: " + ("all met" if not missed else "MISSED: " + "; ".join(missed)))
    print(f"cpu_pct_of_core={cpu_pct:.3f} rss_mb={rss:.1f} rss_growth_mb={growth:.2f}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
