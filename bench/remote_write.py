"""Prometheus remote-write into accelboard: ingest throughput against binary COPY, and a fleet run.

Usage::

    .venv/bin/python bench/remote_write.py                 # 2,000 hosts x 8 GPUs, 8 scrapes at 15 s
    .venv/bin/python bench/remote_write.py --quick         # the smallest run: 4 hosts, 1 scrape
    .venv/bin/python bench/remote_write.py --hosts 500 --scrapes 6

1. Creates ``accelboard_bench_remote_write`` (``common.bench_database``), a team and an ingest
   token (``accelboard token create``, the real command), and starts the stack as docker-compose
   runs it (``fleet_load.start_stack``: gunicorn with ``accelboard/gunicorn_conf.py`` and the
   image's production settings, Celery workers on ``scheduled``, ``rollups`` and ``bulk``, beat;
   the broker ``--broker``, default ``CELERY_BROKER_URL``, else Redis database 15, purged first).
2. **Throughput** (``--tp-hosts`` hosts x ``--gpus`` GPUs x ``--tp-scrapes`` scrapes, in the past):
   the WriteRequests Prometheus would send with ``--tp-shards`` shards (each shard's samples in
   append order, cut at ``max_samples_per_send`` 2,000), encoded and snappy-compressed before the
   clock, posted by one keep-alive client per shard, as the shards do. Then, in the same run, the
   same rows (one per GPU and scrape: the fields the mapping stores) binary-COPYed with psycopg 3
   into the same table, 10,000 rows a transaction (``bench/ingest.py``'s reference). ``ratio`` is
   what the issue names and ``bench/ingest.py`` computes: remote-write samples/s over binary COPY
   rows/s. A row holds 18 of the request's samples (12 stored, 6 counted and dropped), so the
   like-for-like figure, rows stored per second over COPY's, is printed beside it
   (``rows_ratio``, ~1/18 of ``ratio``). Target: ``ratio`` >= 0.5.
3. **Fleet**: ``--hosts`` dcgm-exporter targets of ``--gpus`` GPUs, each scraped every 15 s for
   ``--scrapes`` scrapes at real pace (no compressed time: timestamps are the wall clock's), each
   target at its own offset in the interval (Prometheus spreads targets over it). A scrape gives
   18 series a GPU: the 12 the mapping reads (power, energy counter, GPU and memory-copy
   utilisation, framebuffer used/free/reserved, SM and memory clocks, GPU temperature, clock-event
   reasons, ECC DBE) and 6 it does not (memory temperature, PCIe replays, encoder and decoder
   utilisation, last XID, vGPU licence), with the labels dcgm-exporter and Prometheus put on them
   (``Hostname``, ``UUID``, ``gpu``, ``device``, ``modelName``, ``pciBusID``,
   ``DCGM_FI_DRIVER_VERSION``, ``instance``, ``job``; ``pod``, ``namespace``, ``container`` on
   the GPUs a pod holds, 7 in 8). Before the clock, one scrape of every target registers the hosts.

   How Prometheus 2.x sends them (``storage/remote/queue_manager.go``), modelled here with its
   default ``queue_config``: each scrape's samples are appended to the WAL in the page's order
   and read back in that order; each sample goes to shard ``series ref % shards`` (the ref is the
   head's series id, given in the order series first appear: not a hash of the labels) into that
   shard's queue (``capacity`` 10,000; a full queue stalls the WAL reader); each shard sends one
   request at a time, of ``max_samples_per_send`` 2,000 samples (one ``TimeSeries`` per sample) or
   what it holds after ``batch_send_deadline`` 5 s, retried with backoff (30 ms doubling to 5 s)
   on a 5xx, 429 or a failed connection, dropped on another 4xx. Every 10 s the shard count is
   recomputed as Prometheus does: ``desired = time per sample x (rate in + 5% of the backlog)``
   from EWMA rates (weight 0.2), kept within 30% of the current count, not lowered while more than
   10 s behind, between ``min_shards`` 1 and ``max_shards`` 200; resharding flushes every queue
   and starts the new shards. Not modelled: the WAL's segment reads (samples reach the queues at
   once), exemplars and metadata.

   First ``--warm-scrapes`` (2) scrapes at real pace, not timed: each web worker decodes a series'
   labels once, then looks its bytes up (``LabelCache``); their CPU is printed apart. Measured over
   the timed scrapes: the web server's CPU (gunicorn and its workers, psutil) in cores
   (target <= 0.5), the Celery workers', beat's and this database's PostgreSQL backends' beside
   it; request latency p50/p99; the lag behind the newest sample as Prometheus reports it
   (``prometheus_remote_storage_highest_timestamp_in_seconds`` minus
   ``..._queue_highest_sent_timestamp_seconds``, read every second; target < 60 s); the shard
   counts. After the last scrape the queues drain, then every GPU and scrape must be one stored
   row with every mapped field (``rows_lost``, ``rows_incomplete``); rows without
   ``mem_total_bytes`` (the framebuffer's parts cut into two requests, a documented limit) are
   counted apart (``no_mem_total``), not a miss.

Last line: ``samples_s= copy_rows_s= ratio= rows_ratio= hosts= web_cores= p99_ms= lag_s= errors=
rows_lost= rows_incomplete= no_mem_total=``.
Exits 1 on a miss (ratio < 0.5, web CPU > 0.5 core, lag >= 60 s, any refused request, a row lost
or incomplete).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import cramjam
from common import ROOT, bench_database, bench_lock, production_env, quick_parse, server_url
from fleet_load import DEFAULT_BROKER, BackendCpu, cpu_seconds, percentile, start_stack
from ingest import free_port, wait_for

TARGETS = {"ratio": 0.5, "web_cores": 0.5, "lag_s": 60.0}
SCRAPE_S = 15.0
# Prometheus 2.x's default queue_config.
MAX_SAMPLES_PER_SEND = 2000
CAPACITY = 10_000
MIN_SHARDS, MAX_SHARDS = 1, 200
BATCH_SEND_DEADLINE_S = 5.0
MIN_BACKOFF_S, MAX_BACKOFF_S = 0.03, 5.0
SHARD_UPDATE_S = 10.0
EWMA_WEIGHT = 0.2
SHARD_TOLERANCE = 0.3
REMOTE_TIMEOUT_S = 30.0

# dcgm-exporter's series per GPU: the mapped ones, then a few the mapping does not read.
MAPPED = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
)
UNMAPPED = (
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
)
METRICS = MAPPED + UNMAPPED
# The stored columns every row must have once its instant's parts are merged.
STORED = (
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
)
HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "User-Agent": "Prometheus/2.53.0",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=2000, help="fleet: dcgm-exporter targets")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
    parser.add_argument(
        "--scrapes", type=int, default=8, help="fleet: timed scrapes of every target (15 s apart)"
    )
    parser.add_argument(
        "--warm-scrapes",
        type=int,
        default=2,
        help="fleet: scrapes at real pace before the timed ones (each web worker learns the series; "
        "their CPU is printed apart)",
    )
    parser.add_argument("--tp-hosts", type=int, default=64, help="throughput: hosts")
    parser.add_argument("--tp-scrapes", type=int, default=20, help="throughput: scrapes of each host")
    parser.add_argument("--tp-shards", type=int, default=4, help="throughput: Prometheus shards (clients)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-fleet", action="store_true")
    parser.add_argument("--workers", type=int, default=0, help="gunicorn workers (default: gunicorn_conf's)")
    parser.add_argument("--log-level", default="warning", help="the Celery processes' log level")
    parser.add_argument(
        "--broker",
        default=os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER,
        help=f"the stack's broker, its queues purged first (default CELERY_BROKER_URL, else {DEFAULT_BROKER})",
    )
    parser.add_argument("--database", default="accelboard_bench_remote_write")
    args = quick_parse(
        parser, hosts=4, gpus=2, scrapes=1, warm_scrapes=0, tp_hosts=2, tp_scrapes=2, tp_shards=1, workers=1
    )
    if args.warm_scrapes < 0:
        parser.error("--warm-scrapes must be at least 0")
    if min(args.hosts, args.gpus, args.scrapes, args.tp_hosts, args.tp_scrapes, args.tp_shards) < 1:
        parser.error("counts must be at least 1")
    return args


# --- what Prometheus writes ----------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_DOUBLE = struct.Struct("<d")


class Fleet:
    """The fleet's series: label bytes in series-ref order (the order a first scrape creates them:
    the page's, metric family by family, GPU by GPU) and each GPU's values, advancing per scrape."""

    def __init__(self, hosts: int, gpus: int, *, prefix: str) -> None:
        rng = random.Random(32 + len(prefix))
        self.prefix = prefix
        self.hosts = hosts
        self.gpus = gpus
        self.labels: list[bytes] = []  # by series ref
        self.host_series: list[range] = []  # each host's series refs
        self.energy = [[rng.uniform(1e9, 5e9) for _ in range(gpus)] for _ in range(hosts)]
        self.offsets = [rng.uniform(0, SCRAPE_S) for _ in range(hosts)]  # Prometheus's per-target offset
        for h in range(hosts):
            start = len(self.labels)
            for metric in METRICS:
                for g in range(gpus):
                    labels = {
                        "DCGM_FI_DRIVER_VERSION": "550.90.07",
                        "Hostname": self.hostname(h),
                        "UUID": self.uuid(h, g),
                        "__name__": metric,
                        "device": f"nvidia{g}",
                        "gpu": str(g),
                        "instance": f"10.{h // 250}.{h % 250}.1:9400",
                        "job": "dcgm-exporter",
                        "modelName": "NVIDIA H100 80GB HBM3",
                        "pciBusID": f"00000000:{0x18 + g:02X}:00.0",
                    }
                    if g != gpus - 1:  # a pod on 7 GPUs in 8
                        labels |= {
                            "container": "main",
                            "namespace": f"team-{h % 7}",
                            "pod": f"train-{h}-{g // 4}",
                        }
                    # Prometheus sends labels sorted by name.
                    self.labels.append(
                        b"".join(
                            _field(1, _field(1, k.encode()) + _field(2, v.encode()))
                            for k, v in sorted(labels.items())
                        )
                    )
            self.host_series.append(range(start, len(self.labels)))

    def hostname(self, host: int) -> str:
        return f"{self.prefix}-{host:04d}"

    def uuid(self, host: int, gpu: int) -> str:
        return f"GPU-{zlib.crc32(f'{self.prefix}{host}-{gpu}'.encode()):08x}-{self.prefix}-{host:04d}-{gpu}"

    def scrape(self, host: int, ms: int, rng: random.Random) -> list[tuple[int, int, float]]:
        """One scrape of ``host`` at ``ms``: (series ref, ms, value) in the page's order."""
        gpus = self.gpus
        values: list[list[float]] = []
        for g in range(gpus):
            power = rng.uniform(90, 700)
            self.energy[host][g] += power * SCRAPE_S * 1000
            used = rng.randrange(0, 80_000)
            values.append(
                [
                    1980.0, 2619.0, rng.uniform(30, 80), power, float(int(self.energy[host][g])),
                    float(rng.randrange(101)), float(rng.randrange(101)), float(81_559 - used - 500), float(used),
                    500.0, 0.0, 0.0,
                    rng.uniform(30, 80), 0.0, 0.0, 0.0, 0.0, 1.0,
                ]
            )  # fmt: skip
        refs = self.host_series[host]
        out = []
        for m in range(len(METRICS)):
            base = refs.start + m * gpus
            for g in range(gpus):
                out.append((base + g, ms, values[g][m]))
        return out

    def encode(self, samples: list[tuple[int, int, float]]) -> bytes:
        """A snappy-compressed WriteRequest, one TimeSeries per sample (as Prometheus 2.x builds it)."""
        labels = self.labels
        parts = []
        for ref, ms, value in samples:
            sample = b"\x09" + _DOUBLE.pack(value) + b"\x10" + _varint(ms)
            series = labels[ref] + b"\x12" + _varint(len(sample)) + sample
            parts.append(b"\x0a" + _varint(len(series)) + series)
        return bytes(cramjam.snappy.compress_raw(b"".join(parts)))


# --- the sender: Prometheus's queue manager --------------------------------------------------------


class Ewma:
    def __init__(self) -> None:
        self.new = 0.0
        self.rate = 0.0
        self.init = False

    def tick(self, interval: float) -> None:
        instant = self.new / interval
        self.new = 0.0
        if self.init:
            self.rate += EWMA_WEIGHT * (instant - self.rate)
        else:
            self.init, self.rate = True, instant


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    retries: int = 0
    requests: int = 0
    samples: int = 0
    shard_counts: list[int] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)


class QueueManager:
    """Prometheus 2.x's remote-write queue manager (the module's docstring), posting to ``port``."""

    def __init__(
        self, fleet: Fleet, *, port: int, token: str, shards: int = MIN_SHARDS, dynamic: bool = True
    ) -> None:
        self.fleet = fleet
        self.port = port
        self.headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        self.dynamic = dynamic
        self.lock = threading.Condition()
        self.num_shards = shards
        self.queues: list[list[tuple[int, int, float]]] = []
        self.threads: list[threading.Thread] = []
        self.stopping = False
        self.resharding = False
        self.in_flight = 0
        # Seconds; both start now, so the lag reads 0 until the first sample is appended.
        self.highest_in = self.highest_sent = time.time()
        self.data_in, self.data_out, self.out_duration = Ewma(), Ewma(), Ewma()
        self.stats = Stats()
        self.closed = False
        self._start(shards)

    # Shards -----------------------------------------------------------------------------------
    def _start(self, count: int) -> None:
        self.num_shards = count
        self.queues = [[] for _ in range(count)]
        self.stopping = False
        self.threads = [
            threading.Thread(target=self._run_shard, args=(i,), daemon=True) for i in range(count)
        ]
        for thread in self.threads:
            thread.start()

    def _stop(self) -> None:
        """Flush every queue and stop the shards (Prometheus's soft then hard shutdown)."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        for thread in self.threads:
            thread.join()

    def append(self, samples: list[tuple[int, int, float]]) -> None:
        """The WAL reader: samples in append order, each to its series' shard; blocks on a full queue."""
        with self.lock:
            while self.resharding:
                self.lock.wait()
            for sample in samples:
                while True:
                    queue = self.queues[sample[0] % self.num_shards]
                    if len(queue) < CAPACITY:
                        break
                    self.lock.wait()
                queue.append(sample)
                if len(queue) >= MAX_SAMPLES_PER_SEND:
                    self.lock.notify_all()
            self.data_in.new += len(samples)
            self.highest_in = max(self.highest_in, samples[-1][1] / 1000) if samples else self.highest_in

    def _run_shard(self, index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REMOTE_TIMEOUT_S)
        queue = self.queues[index]
        while True:
            deadline = time.monotonic() + BATCH_SEND_DEADLINE_S
            with self.lock:
                while len(queue) < MAX_SAMPLES_PER_SEND and not self.stopping:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.lock.wait(left)
                if not queue and self.stopping:
                    conn.close()
                    return
                batch = queue[:MAX_SAMPLES_PER_SEND]
                del queue[:MAX_SAMPLES_PER_SEND]
                self.in_flight += 1
                self.lock.notify_all()  # room in the queue
            if batch:
                conn = self._send(conn, batch)
            with self.lock:
                self.in_flight -= 1

    def _send(
        self, conn: http.client.HTTPConnection, batch: list[tuple[int, int, float]]
    ) -> http.client.HTTPConnection:
        body = self.fleet.encode(batch)
        backoff = MIN_BACKOFF_S
        stats = self.stats
        while True:
            started = time.monotonic()
            try:
                try:
                    conn.request("POST", "/api/v1/prometheus/write", body=body, headers=self.headers)
                    response = conn.getresponse()
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                    # The server closed the idle keep-alive connection: Go's transport sends the
                    # request again on a new one at once (not one of Prometheus's retries).
                    conn.close()
                    conn.request("POST", "/api/v1/prometheus/write", body=body, headers=self.headers)
                    response = conn.getresponse()
                text = response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REMOTE_TIMEOUT_S)
                status, text = 0, str(exc).encode()
            took = time.monotonic() - started
            with self.lock:
                stats.statuses[status] = stats.statuses.get(status, 0) + 1
                stats.latencies.append(took)
                stats.requests += 1
                self.out_duration.new += took
                if 200 <= status < 300:
                    stats.samples += len(batch)
                    self.data_out.new += len(batch)
                    self.highest_sent = max(self.highest_sent, max(ms for _r, ms, _v in batch) / 1000)
                    return conn
                if status == 429 or status >= 500 or status == 0:
                    stats.retries += 1
                else:  # Prometheus drops a batch a 4xx refused
                    stats.refused.append(f"HTTP {status}: {text[:300]!r}")
                    return conn
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    # Resharding -------------------------------------------------------------------------------
    def desired_shards(self) -> int:
        with self.lock:
            for rate in (self.data_in, self.data_out, self.out_duration):
                rate.tick(SHARD_UPDATE_S)
            data_in, data_out = self.data_in.rate, self.data_out.rate
            delay = self.highest_in - self.highest_sent
            if data_out <= 0:
                return self.num_shards
            time_per_sample = self.out_duration.rate / data_out
            desired = time_per_sample * (data_in + 0.05 * delay * data_in)
            lower, upper = self.num_shards * (1 - SHARD_TOLERANCE), self.num_shards * (1 + SHARD_TOLERANCE)
            desired = float(int(-(-desired // 1)))  # ceil
            if lower <= desired <= upper:
                return self.num_shards
            shards = int(desired)
            if shards < self.num_shards and delay > 10.0:
                return self.num_shards
            return max(MIN_SHARDS, min(MAX_SHARDS, shards))

    def watch(self, stop: threading.Event) -> None:
        """Every second the lag; every 10 s the shard count (resharding when it changes)."""
        next_update = time.monotonic() + SHARD_UPDATE_S
        while not stop.wait(1.0):
            with self.lock:
                if self.highest_in:
                    self.stats.lags.append(max(0.0, self.highest_in - self.highest_sent))
                self.stats.shard_counts.append(self.num_shards)
            if self.dynamic and time.monotonic() >= next_update:
                next_update = time.monotonic() + SHARD_UPDATE_S
                wanted = self.desired_shards()
                if wanted != self.num_shards:
                    # The WAL reader waits while the old shards flush what they hold.
                    with self.lock:
                        self.resharding = True
                    self._stop()
                    with self.lock:
                        self._start(wanted)
                        self.resharding = False
                        self.lock.notify_all()

    def drain(self, timeout: float) -> bool:
        """Send what is queued now (the deadline flush); True when everything was sent in time."""
        deadline = time.monotonic() + timeout
        with self.lock:
            self.lock.notify_all()
            while (any(self.queues) or self.in_flight) and time.monotonic() < deadline:
                self.lock.wait(0.5)
            return not any(self.queues) and not self.in_flight

    def close(self) -> None:
        self._stop()


# --- throughput ---------------------------------------------------------------------------------


def shard_requests(
    fleet: Fleet, *, scrapes: int, shards: int, end_ms: int
) -> tuple[list[list[bytes]], int, list]:
    """Each shard's requests, in order, for ``scrapes`` scrapes of every host ending at
    ``end_ms``; the rows (host, gpu, ms, values) the mapping stores; the sample count."""
    rng = random.Random(7)
    queues: list[list[tuple[int, int, float]]] = [[] for _ in range(shards)]
    rows = []
    total = 0
    for s in range(scrapes):
        ms = end_ms - (scrapes - s) * int(SCRAPE_S * 1000)
        for host in range(fleet.hosts):
            samples = fleet.scrape(host, ms, rng)
            total += len(samples)
            for sample in samples:
                queues[sample[0] % shards].append(sample)
            for g in range(fleet.gpus):
                rows.append((host, g, ms, [samples[m * fleet.gpus + g][2] for m in range(len(MAPPED))]))
    bodies = [
        [
            fleet.encode(queue[i : i + MAX_SAMPLES_PER_SEND])
            for i in range(0, len(queue), MAX_SAMPLES_PER_SEND)
        ]
        for queue in queues
    ]
    return bodies, total, rows


def post_shards(port: int, token: str, bodies: list[list[bytes]]) -> tuple[float, list[str]]:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    errors: list[str] = []

    def shard(requests: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for body in requests:
            backoff = MIN_BACKOFF_S
            while True:
                conn.request("POST", "/api/v1/prometheus/write", body=body, headers=headers)
                response = conn.getresponse()
                text = response.read()
                if response.status == 200:
                    break
                errors.append(f"HTTP {response.status}: {text[:300]!r}")
                if response.status != 429 and response.status < 500:
                    return  # refused: Prometheus drops the batch; the bench stops
                time.sleep(backoff)  # Prometheus retries a 5xx or 429 with the same body
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        conn.close()

    threads = [threading.Thread(target=shard, args=(requests,)) for requests in bodies]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, errors


def copy_rows(rows: list, uuids: dict[tuple[int, int], int], host_ids: dict[int, int]) -> float:
    """Binary COPY of ``rows`` (the columns the mapping fills), 10,000 a transaction; seconds."""
    import psycopg
    from django.conf import settings

    from accelboard.fleet.partition_services import _COPY_TYPES, TABLE

    columns = ["time", "host_id", "accelerator_id", *STORED]
    types = [_COPY_TYPES.get(column, "float4") for column in columns]
    prepared = []
    for host, g, ms, v in rows:
        # MAPPED's order: sm, mem clock, temp, power, energy, util, mem util, fb free, used, reserved, reasons, ecc
        prepared.append(
            (
                datetime.fromtimestamp(ms / 1000, UTC), host_ids[host], uuids[(host, g)],
                v[3], int(v[4]), v[5], v[6], int(v[8]) * 2**20, int(v[7] + v[8] + v[9]) * 2**20,
                int(v[0]), int(v[1]), int(v[2]), int(v[10]), int(v[11]),
            )
        )  # fmt: skip
    with psycopg.connect(settings.DATABASE_URL) as conn:
        started = time.perf_counter()
        for i in range(0, len(prepared), 10_000):
            with conn.transaction(), conn.cursor() as cursor:
                with cursor.copy(f"COPY {TABLE} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    for row in prepared[i : i + 10_000]:
                        copy.write_row(row)
        return time.perf_counter() - started


def throughput(args: argparse.Namespace, port: int, token: str) -> dict[str, float]:
    from accelboard.fleet.models import Accelerator, Host

    fleet = Fleet(args.tp_hosts, args.gpus, prefix="rw-tp")
    end_ms = int(time.time() * 1000) - 60_000
    # Registration first (one scrape, not timed), as on a running fleet.
    warm, _n, _rows = shard_requests(fleet, scrapes=1, shards=1, end_ms=end_ms - args.tp_scrapes * 15_000)
    _s, errors = post_shards(port, token, warm)
    if errors:
        raise SystemExit("throughput warm-up refused: " + errors[0])
    bodies, samples, rows = shard_requests(
        fleet, scrapes=args.tp_scrapes, shards=args.tp_shards, end_ms=end_ms
    )
    requests = sum(len(b) for b in bodies)
    print(
        f"throughput: {args.tp_hosts} hosts x {args.gpus} GPUs x {args.tp_scrapes} scrapes = {samples:,} samples "
        f"({len(rows):,} rows) in {requests} requests over {args.tp_shards} shards, "
        f"{sum(len(b) for q in bodies for b in q) / requests / 1024:.0f} KiB each compressed"
    )
    elapsed, errors = post_shards(port, token, bodies)
    refused = [e for e in errors if not e.startswith(("HTTP 5", "HTTP 429"))]
    if refused:
        raise SystemExit("throughput: a request was refused: " + refused[0])
    if errors:
        print(f"throughput: {len(errors)} answers retried, the first: {errors[0]}")
    uuid_of = {fleet.uuid(h, g): (h, g) for h in range(args.tp_hosts) for g in range(args.gpus)}
    ids = {uuid_of[u]: pk for u, pk in Accelerator.objects.filter(uuid__in=uuid_of).values_list("uuid", "pk")}
    name_of = {fleet.hostname(h): h for h in range(args.tp_hosts)}
    hosts = {
        name_of[n]: pk for n, pk in Host.objects.filter(hostname__in=name_of).values_list("hostname", "pk")
    }
    copy_s = copy_rows(rows, ids, hosts)
    api_rows = len(rows) / elapsed
    copy_rate = len(rows) / copy_s
    ratio = samples / elapsed / copy_rate
    print(
        f"remote-write: {samples / elapsed:>10,.0f} samples/s = {api_rows:,.0f} rows/s ({elapsed:.2f} s, "
        f"{args.tp_shards} shards posting at once)"
    )
    print(f"binary COPY:  {copy_rate:>10,.0f} rows/s ({len(rows):,} rows in {copy_s:.2f} s, one connection)")
    print(
        f"ratio, remote-write samples/s against COPY rows/s: {ratio:.2f} (target >= {TARGETS['ratio']}); "
        f"rows/s against rows/s (a row holds {len(METRICS)} of the request's samples): {api_rows / copy_rate:.3f}"
    )
    return {
        "samples_s": samples / elapsed,
        "copy_rows_s": copy_rate,
        "ratio": ratio,
        "rows_ratio": api_rows / copy_rate,
    }


# --- fleet --------------------------------------------------------------------------------------


def fleet_run(
    args: argparse.Namespace, port: int, token: str, stack: dict, database: str
) -> dict[str, float]:
    from django.db import connection

    fleet = Fleet(args.hosts, args.gpus, prefix="rw-node")
    rng = random.Random(11)
    per_scrape = args.hosts * args.gpus * len(METRICS)
    print(
        f"fleet: {args.hosts} hosts x {args.gpus} GPUs x {len(METRICS)} series = {per_scrape:,} samples every "
        f"{SCRAPE_S:g} s ({per_scrape / SCRAPE_S:,.0f} samples/s, {per_scrape / SCRAPE_S / MAX_SAMPLES_PER_SEND:.1f} "
        f"full requests/s), {args.scrapes} scrapes at real pace"
    )
    # Registration: one scrape of every target, sent by one shard (requests of ~14 whole hosts;
    # with more, every request carries a slice of every host), before the clock.
    first_ms = int((time.time() - SCRAPE_S) * 1000)
    started = time.perf_counter()
    manager = QueueManager(fleet, port=port, token=token, shards=1, dynamic=False)
    for host in range(args.hosts):
        manager.append(fleet.scrape(host, first_ms, rng))
    ok = manager.drain(600)
    manager.close()
    if not ok or manager.stats.refused:
        raise SystemExit(f"registration failed: {manager.stats.refused[:1] or 'not drained in 600 s'}")
    print(f"registered {args.hosts} hosts (one scrape each) in {time.perf_counter() - started:.1f} s")

    backends = BackendCpu(database)
    manager = QueueManager(fleet, port=port, token=token)
    stop = threading.Event()
    watcher = threading.Thread(target=manager.watch, args=(stop,), daemon=True)
    warm_before = {name: cpu_seconds(process) for name, process in stack.items()}
    start = time.time()
    watcher.start()
    # Period k starts at start + k * 15; target h is scraped at its offset in each period. The
    # first ``--warm-scrapes`` periods are not timed: each web worker decodes a series' labels the
    # first time it sees it (``fleet.remote_write.LabelCache``), after which only the bytes are
    # looked up; the steady state is what a running fleet costs.
    begin = start + args.warm_scrapes * SCRAPE_S
    schedule = sorted(
        (start + k * SCRAPE_S + fleet.offsets[h], h)
        for k in range(args.warm_scrapes + args.scrapes)
        for h in range(args.hosts)
    )
    cpu_before: dict[str, float] = {}
    pg_before = 0.0
    for due, host in schedule:
        if not cpu_before and due >= begin:
            wait = begin - time.time()
            if wait > 0:
                time.sleep(wait)
            cpu_before = {name: cpu_seconds(process) for name, process in stack.items()}
            pg_before = backends.sample()
            if args.warm_scrapes:
                warm = {name: cpu_before[name] - warm_before[name] for name, _ in stack.items()}
                print(
                    f"warm-up ({args.warm_scrapes} scrapes, not timed): CPU in cores "
                    + ", ".join(f"{name} {seconds / (begin - start):.2f}" for name, seconds in warm.items())
                )
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        manager.append(fleet.scrape(host, int(due * 1000), rng))
    scraped = time.time()
    drained = manager.drain(300)
    end = time.time()
    cpu = {name: cpu_seconds(process) - cpu_before[name] for name, process in stack.items()}
    pg = backends.sample() - pg_before
    stop.set()
    watcher.join(timeout=5)
    manager.close()
    wall = end - begin
    stats = manager.stats
    expected = args.hosts * args.gpus * (args.warm_scrapes + args.scrapes + 1)
    timed_samples = args.hosts * args.gpus * len(METRICS) * args.scrapes
    # mem_total_bytes is the framebuffer's parts summed within one request (docs/api.md: a cut
    # between FB_USED, FB_FREE and FB_RESERVED leaves it missing): counted apart.
    nulls = " OR ".join(f"{column} IS NULL" for column in STORED if column != "mem_total_bytes")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT (accelerator_id, time)), count(*) FILTER (WHERE "
            + nulls
            + "), count(*) FILTER (WHERE mem_total_bytes IS NULL)"
            + " FROM fleet_telemetrysample s JOIN fleet_host h ON h.id = s.host_id WHERE h.hostname LIKE 'rw-node-%%'"
        )
        stored, distinct, incomplete, no_total = cursor.fetchone()
    rows_lost = max(0, expected - distinct) + (stored - distinct)
    web_cores = cpu["web"] / wall
    p50 = percentile(stats.latencies, 0.5) * 1000
    p99 = percentile(stats.latencies, 0.99) * 1000
    lag = max(stats.lags, default=0.0)
    shards = sorted(set(stats.shard_counts))
    errors = len(stats.refused)
    print(
        f"posted {stats.requests:,} requests ({stats.retries} retried, statuses {stats.statuses}), "
        f"{stats.samples:,} samples (warm-up included), timed {wall:.0f} s (last scrape at {scraped - begin:.0f} s, "
        f"queues {'drained' if drained else 'NOT drained'} {end - scraped:.1f} s later)"
    )
    print(
        f"request latency: p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(stats.latencies, default=0) * 1000:.0f} ms"
    )
    print(
        f"shards: {shards[0] if shards else '-'}..{shards[-1] if shards else '-'} "
        f"(last {stats.shard_counts[-1] if stats.shard_counts else '-'})"
    )
    print(
        f"lag behind the newest sample: max {lag:.1f} s, p50 {percentile(stats.lags, 0.5):.1f} s "
        f"(target < {TARGETS['lag_s']:g} s)"
    )
    print(
        "CPU in cores over the run: "
        + ", ".join(f"{name} {seconds / wall:.2f}" for name, seconds in cpu.items())
        + f", this database's PostgreSQL backends {pg / wall:.2f}"
        + f"; web {cpu['web'] / timed_samples * 1e6:.1f} us per sample"
    )
    full_rate = 2000 * 8 * len(METRICS) / SCRAPE_S
    if args.hosts * args.gpus < 16_000:
        print(
            f"at 2,000 hosts x 8 GPUs ({full_rate:,.0f} samples/s) the web's CPU per sample of this run would be "
            f"{cpu['web'] / timed_samples * full_rate:.2f} cores (a linear extrapolation, not a measurement)"
        )
    print(
        f"rows: expected {expected:,} (registration scrape included), stored {stored:,} ({distinct:,} distinct), "
        f"missing a mapped field {incomplete:,}; without mem_total_bytes (the framebuffer's parts cut "
        f"apart: a documented limit) {no_total:,}"
    )
    for error in stats.refused[:3]:
        print("refused:", error)
    return {
        "web_cores": web_cores,
        "p99_ms": p99,
        "lag_s": lag,
        "errors": errors,
        "rows_lost": rows_lost,
        "rows_incomplete": incomplete,
        "no_total": no_total,
        "drained": drained,
    }


def main() -> int:
    args = parse_args()
    os.environ["CELERY_BROKER_URL"] = args.broker
    load_before = os.getloadavg()
    with (
        bench_lock(server_url(), f"broker {args.broker}"),
        bench_database(args.database) as url,
        tempfile.TemporaryDirectory() as home,
    ):
        from accelboard.core.services import team_create

        team_create(name="Remote write", slug="rw")
        env = {**production_env(url, args.broker), "CELERY_TASK_ALWAYS_EAGER": "0"}
        if args.workers:
            env["WEB_CONCURRENCY"] = str(args.workers)
        token = subprocess.run(
            [sys.executable, "-m", "accelboard.cli", "token", "create", "--team", "rw", "--kind", "ingest"],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "accelboard", "purge", "-f", "-Q", "scheduled,rollups,bulk"],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        port = free_port()
        stack = start_stack(args, env, Path(home), port)
        tp: dict[str, float] = {}
        fl: dict[str, float] = {}
        try:
            wait_for(port, stack["web"])
            print(
                f"stack: gunicorn on port {port} + celery workers + beat; broker {args.broker}; load {load_before[0]:.1f}"
            )
            if not args.skip_throughput:
                tp = throughput(args, port, token)
            if not args.skip_fleet:
                fl = fleet_run(args, port, token, stack, args.database)
        finally:
            for process in stack.values():
                process.terminate()
            for name in stack:
                tail = (Path(home) / f"{name}.log").read_text(errors="replace").strip().splitlines()[-5:]
                if tail and any("Error" in line or "Traceback" in line for line in tail):
                    print(f"--- {name} log (last lines)", *tail, sep="\n")
            for process in stack.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    load_after = os.getloadavg()
    print(f"load average: {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    missed = []
    if tp and tp["ratio"] < TARGETS["ratio"]:
        missed.append(f"ratio {tp['ratio']:.2f} < {TARGETS['ratio']}")
    if fl:
        if fl["web_cores"] > TARGETS["web_cores"]:
            missed.append(f"web CPU {fl['web_cores']:.2f} cores > {TARGETS['web_cores']}")
        if fl["lag_s"] >= TARGETS["lag_s"]:
            missed.append(f"lag {fl['lag_s']:.0f} s >= {TARGETS['lag_s']:g}")
        if fl["errors"]:
            missed.append(f"{fl['errors']} requests refused")
        if fl["rows_lost"] or fl["rows_incomplete"] or not fl["drained"]:
            missed.append(f"{fl['rows_lost']} rows lost, {fl['rows_incomplete']} incomplete")
    print("MISSED: " + "; ".join(missed) if missed else "all targets met")
    figures = []
    if tp:
        figures.append(
            f"samples_s={tp['samples_s']:.0f} copy_rows_s={tp['copy_rows_s']:.0f} ratio={tp['ratio']:.2f} "
            f"rows_ratio={tp['rows_ratio']:.3f}"
        )
    if fl:
        figures.append(
            f"hosts={args.hosts} web_cores={fl['web_cores']:.2f} p99_ms={fl['p99_ms']:.0f} lag_s={fl['lag_s']:.1f} "
            f"errors={fl['errors']} rows_lost={fl['rows_lost']} rows_incomplete={fl['rows_incomplete']} "
            f"no_mem_total={fl['no_total']}"
        )
    print(" ".join(figures))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
