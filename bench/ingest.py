"""End-to-end telemetry ingest through the HTTP API against raw binary COPY of the same rows.

Usage::

    .venv/bin/python bench/ingest.py                     # 4 clients, 10,000-sample batches
    .venv/bin/python bench/ingest.py --batches 8         # quick run

1. Creates ``accelboard_bench_ingest`` (see ``common.bench_database``), a team and an ingest token with
   ``accelboard token create --team bench --kind ingest`` (the real command, as a subprocess).
2. Starts a real gunicorn serving ``accelboard.wsgi`` on the bench database and posts
   ``--batches`` batches of ``--batch-size`` samples (8 GPUs per simulated host) from 4
   concurrent clients, first as JSON, then as gzipped JSON. Bodies are encoded before the clock
   starts: the figure is the server's, not the client's JSON encoder.
3. In the same run, binary-COPYs the same rows with psycopg 3 (``write_row``, 10,000 rows per
   transaction, one connection) into the same table with the same indexes.
Prints both and their ratio; the last line is ``api_rows_s=… copy_rows_s=… ratio=…`` (the API
figure is plain JSON; gzipped JSON is printed above it). Target: ratio >= 0.3.

Celery: the server publishes to the real broker, as in production (``--broker``, default
``CELERY_BROKER_URL``, else the SQLAlchemy transport in the bench database, as the settings would
derive it): each batch marks its range dirty and each web process asks for one rollup drain at
most every few seconds (no task per batch). No worker runs, so those few requests are purged from
the ``scheduled`` queue at the end.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from common import ROOT, bench_database, production_env, quick_parse

GPUS_PER_HOST = 8
COLUMNS = (
    "power_w",
    "energy_mj",
    "gpu_util",
    "mem_util",
    "mem_used_bytes",
    "mem_total_bytes",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "ecc_errors",
    "xid_errors",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=32, help="batches per encoding (default 32)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument(
        "--broker",
        default=os.environ.get("CELERY_BROKER_URL", ""),
        help="CELERY_BROKER_URL for the server (default: the env's, else the bench database's SQLAlchemy transport)",
    )
    args = quick_parse(parser, clients=1, batch_size=96, batches=2, workers=1)
    if min(args.clients, args.batch_size, args.batches, args.workers) < 1:
        parser.error("--clients, --batch-size, --batches and --workers must be at least 1")
    if args.batch_size % GPUS_PER_HOST:
        parser.error(f"--batch-size must be a multiple of {GPUS_PER_HOST} (GPUs per host)")
    return args


def batch_payloads(*, batches: int, batch_size: int, hosts: int, tag: str, end: datetime) -> list[dict]:
    """``batches`` telemetry batches in the contract's shape, spread over ``hosts`` hosts."""
    rng = np.random.default_rng(1)
    seconds = batch_size // GPUS_PER_HOST
    payloads = []
    for index in range(batches):
        host = index % hosts
        uuids = [f"GPU-bench-{host:03d}-{g}" for g in range(GPUS_PER_HOST)]
        # Each host's batches follow each other in time, ending before ``end`` (no future samples).
        first = end.timestamp() - (batches // hosts + 1) * seconds + (index // hosts) * seconds
        epochs = np.repeat(first + np.arange(seconds, dtype=float), GPUS_PER_HOST)
        power = np.round(rng.uniform(100, 700, batch_size), 1)
        samples = [
            {
                "time": float(epochs[i]),
                "gpu": uuids[i % GPUS_PER_HOST],
                "power_w": float(power[i]),
                "energy_mj": 10**9 + i * 500,
                "gpu_util": float(i % 101),
                "mem_util": 40.0,
                "mem_used_bytes": 61203283968,
                "mem_total_bytes": 85520809984,
                "sm_clock_mhz": 1980,
                "mem_clock_mhz": 2619,
                "temperature_c": 61,
                "throttle_reasons": 0,
                "ecc_errors": 0,
                "xid_errors": 0,
            }
            for i in range(batch_size)
        ]
        payloads.append(
            {
                "batch_id": f"bench-{tag}-{index:06d}",
                "host": {"hostname": f"bench-node-{host:03d}", "agent_version": "bench", "simulated": True},
                "accelerators": [
                    {"uuid": uuid, "index": g, "name": "NVIDIA H100 80GB HBM3"}
                    for g, uuid in enumerate(uuids)
                ],
                "samples": samples,
            }
        )
    return payloads


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not listen on port {port} within {timeout:.0f} s")


def post_all(*, port: int, token: str, bodies: list[bytes], gzipped: bool, clients: int) -> float:
    """Post every body from ``clients`` threads (keep-alive connections); return seconds taken."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    errors: list[str] = []
    lock = threading.Lock()
    queue = list(enumerate(bodies))

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                if not queue or errors:
                    break
                index, body = queue.pop(0)
            conn.request("POST", "/api/v1/telemetry", body=body, headers=headers)
            response = conn.getresponse()
            text = response.read()
            if response.status != 200:
                with lock:
                    errors.append(f"batch {index}: HTTP {response.status} {text[:300]!r}")
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit("the API refused a batch: " + errors[0])
    return elapsed


def copy_rows(payloads: list[dict], gpu_ids: dict[str, int], host_ids: dict[str, int]) -> tuple[int, float]:
    """Binary COPY of the payloads' rows, one transaction per batch; returns (rows, seconds)."""
    import psycopg
    from django.conf import settings

    from accelboard.fleet.partition_services import _COPY_TYPES, TABLE

    columns = ["time", "host_id", "accelerator_id", *COLUMNS]
    types = [_COPY_TYPES.get(column, "float4") for column in columns]
    batches = []
    for payload in payloads:
        host = host_ids[payload["host"]["hostname"]]
        batches.append(
            [
                (
                    datetime.fromtimestamp(s["time"], UTC),
                    host,
                    gpu_ids[s["gpu"]],
                    *(s[column] for column in COLUMNS),
                )
                for s in payload["samples"]
            ]
        )
    rows = 0
    with psycopg.connect(settings.DATABASE_URL) as conn:
        started = time.perf_counter()
        for batch in batches:
            with conn.transaction(), conn.cursor() as cursor:
                with cursor.copy(f"COPY {TABLE} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    for row in batch:
                        copy.write_row(row)
            rows += len(batch)
        elapsed = time.perf_counter() - started
    return rows, elapsed


def main() -> None:
    args = parse_args()
    hosts = args.clients * 2
    with bench_database("accelboard_bench_ingest") as url:
        from accelboard.core.services import team_create
        from accelboard.embedded import broker_url_for
        from accelboard.fleet.models import Accelerator, Host

        team_create(name="Bench", slug="bench")
        broker = args.broker or broker_url_for(url)
        env = production_env(url, broker)
        print(f"broker: {broker.split('@')[-1]}")
        token = subprocess.run(
            [
                sys.executable,
                "-m",
                "accelboard.cli",
                "token",
                "create",
                "--team",
                "bench",
                "--kind",
                "ingest",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        end = datetime.now(UTC) - timedelta(minutes=1)
        plain = batch_payloads(
            batches=args.batches, batch_size=args.batch_size, hosts=hosts, tag="json", end=end
        )
        zipped = batch_payloads(
            batches=args.batches, batch_size=args.batch_size, hosts=hosts, tag="gzip", end=end
        )
        plain_bodies = [json.dumps(p).encode() for p in plain]
        gzip_bodies = [gzip.compress(json.dumps(p).encode(), compresslevel=6) for p in zipped]
        print(
            f"{args.batches} batches x {args.batch_size:,} samples per encoding; JSON body "
            f"{len(plain_bodies[0]) / 2**20:.1f} MiB, gzipped {len(gzip_bodies[0]) / 2**20:.2f} MiB"
        )
        port = free_port()
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "accelboard.wsgi:application",
                f"--bind=127.0.0.1:{port}",
                f"--workers={args.workers}",
                "--timeout=300",
                "--log-level=warning",
            ],
            cwd=ROOT,
            env=env,
        )
        try:
            wait_for(port, server)
            # Small batches first: hosts registered and partitions made, as on a running fleet,
            # and enough of them, concurrently, that every worker has served a request.
            warm = batch_payloads(
                batches=hosts * 2, batch_size=GPUS_PER_HOST, hosts=hosts, tag="warm", end=end
            )
            warm_bodies = [json.dumps(p).encode() for p in warm]
            post_all(port=port, token=token, bodies=warm_bodies, gzipped=False, clients=args.workers)
            rows = args.batches * args.batch_size
            json_s = post_all(
                port=port, token=token, bodies=plain_bodies, gzipped=False, clients=args.clients
            )
            gzip_s = post_all(port=port, token=token, bodies=gzip_bodies, gzipped=True, clients=args.clients)
        finally:
            server.terminate()
            server.wait(timeout=30)
            # The drain requests the server published: no worker ran them, and nobody else should.
            subprocess.run(
                [sys.executable, "-m", "celery", "-A", "accelboard", "purge", "-f", "-Q", "scheduled,rollups,bulk"],
                cwd=ROOT, env=env, capture_output=True,
            )  # fmt: skip
        api_json = rows / json_s
        api_gzip = rows / gzip_s
        gpu_ids = dict(Accelerator.objects.values_list("uuid", "pk"))
        host_ids = dict(Host.objects.values_list("hostname", "pk"))
        copied, copy_s = copy_rows(plain, gpu_ids, host_ids)
        copy_rate = copied / copy_s
        print(
            f"API, JSON:         {api_json:>10,.0f} samples/s ({rows:,} in {json_s:.2f} s, {args.clients} clients)"
        )
        print(
            f"API, gzipped JSON: {api_gzip:>10,.0f} samples/s ({rows:,} in {gzip_s:.2f} s, {args.clients} clients)"
        )
        print(
            f"binary COPY:       {copy_rate:>10,.0f} rows/s    ({copied:,} in {copy_s:.2f} s, one connection)"
        )
        print(f"ratio JSON {api_json / copy_rate:.2f}, gzipped {api_gzip / copy_rate:.2f} (target >= 0.3)")
    print(f"api_rows_s={api_json:.0f} copy_rows_s={copy_rate:.0f} ratio={api_json / copy_rate:.2f}")


if __name__ == "__main__":
    main()
