"""Peak memory a request adds to the server, for archives and gzip bodies under the limits.

1. Creates ``accelboard_bench_bomb`` (see ``common.bench_database``), a team and a read-write token
   (``accelboard token create``, the real command).
2. Builds, before any clock starts, the request bodies of each case:

   - ``zip``, ``tar_gz``, ``tar_xz``: an archive holding one member of ``--size-mib`` MiB of
     zeros (the finding: 255 KiB of zip for 250 MiB), posted to ``POST /api/v1/runs`` (multipart);
   - ``zip_lines``: a zip of one member of 3-byte lines just under the per-member limit
     (``inputs.MAX_MEMBER_BYTES``, 32 MiB; 31 MiB): split into lines, ~200 bytes a line;
   - ``zip_lines_at_limit``, ``zip_json_at_limit``: the largest members of short lines and of tiny
     JSON values that the estimate of what reading a file costs (``inputs.MAX_PARSE_BYTES``) lets
     through: the worst an importer is given;
   - ``gzip_telemetry``: ``POST /api/v1/telemetry`` gzipped, one string value of ``--body-mib``;
   - ``gzip_telemetry_at_limit``: the same, 31 MiB (under the JSON body's limit, 32 MiB);
   - ``gzip_inference``: ``POST /api/v1/inference-metrics`` gzipped, a small batch padded with
     ``--body-mib`` of whitespace;
   - ``gzip_run_containers``: ``POST /api/v1/runs`` (JSON) gzipped, an array of ``--body-mib`` of
     empty arrays (``[[],[],...]``: each three bytes become a Python list);
   - ``gzip_run_values_at_limit``: the same just under the body's limit on JSON values;
   - ``deep_trace``: ``POST /api/v1/runs/{id}/profile`` with a Kineto trace whose one event's
     ``args`` nest ``--depth`` objects deep (a 422 naming where, not the RecursionError's 500).

3. Starts gunicorn with the production settings (``accelboard/gunicorn_conf.py``: cores + 1
   gthread workers of 4 threads, preloaded). For each case and each mode (one request; four at
   once from four threads) it replaces the workers (killed, forked again from the master), warms
   them (plain uploads), resets each worker's peak resident memory (``/proc/<pid>/clear_refs``),
   posts, and adds up over the workers the rise of the peak (``VmHWM``) over the resident memory
   at the reset.

Targets: one request adds at most 300 MB, four at once at most 1,000 MB (MB = 10^6 bytes), and
every answer is a 4xx or a 2xx (never a 5xx or a dropped connection). Exit status 1 on a miss.
``--quick`` shrinks every size (for a smoke test).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import io
import json
import lzma
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import ROOT, bench_database, production_env, quick_parse

MIB = 1024 * 1024
MB = 1_000_000
TARGET_SINGLE_MB = 300
TARGET_FOUR_MB = 1000
# The largest files under the limits on what reading one costs (``inputs.MAX_PARSE_BYTES``, 160 MB
# estimated: 200 bytes a line, 64 a JSON value) and on a JSON body's values (1,000,000).
LINES_AT_LIMIT = 770_000
VALUES_AT_LIMIT = 1_150_000
JSON_VALUES_AT_LIMIT = 500_000  # "[]," counts twice: a comma and a bracket
# An ordinary upload: a vLLM benchmark result from the importers' fixtures (2 KiB).
REFERENCE = ("vllm_2025.json", (ROOT / "tests" / "importers" / "fixtures" / "vllm_2025.json").read_bytes())


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=250, help="uncompressed size of the archives' member")
    parser.add_argument("--body-mib", type=int, default=63, help="inflated size of the gzip bodies")
    parser.add_argument("--depth", type=int, default=100_000, help="nesting of the deep trace's args")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    return quick_parse(parser, size_mib=16, body_mib=8, depth=20_000)


# --- the bodies ----------------------------------------------------------------------------------


class _Repeat(io.RawIOBase):
    """``size`` bytes of ``pattern`` repeated, read without holding them."""

    def __init__(self, size: int, pattern: bytes = b"\0") -> None:
        self.left = size
        self.block = pattern * (MIB // len(pattern))  # whole patterns: each read starts one

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left, len(self.block))
        buffer[:n] = self.block[:n]
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


def zip_member(name: str, size: int, pattern: bytes = b"\0") -> bytes:
    out = io.BytesIO()
    source = _Repeat(size, pattern)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open(name, "w", force_zip64=True) as member:
            while chunk := source.read(MIB):
                member.write(chunk)
    return out.getvalue()


def zip_bytes(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def tar_member(name: str, size: int, compress: Callable[[bytes], bytes]) -> bytes:
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = size
        archive.addfile(info, _Repeat(size))
    return compress(tar.getvalue())


def gzip_body(parts: list[bytes | tuple[bytes, int]]) -> bytes:
    """Gzip of the parts; a (pattern, size) part is ``size`` bytes of the pattern repeated."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0) as zipped:
        for part in parts:
            if isinstance(part, bytes):
                zipped.write(part)
                continue
            source = _Repeat(part[1], part[0])
            while chunk := source.read(MIB):
                zipped.write(chunk)
    return out.getvalue()


def multipart(field: str, name: str, data: bytes, fields: dict[str, str] | None = None) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    form = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in (fields or {}).items()
    )
    body = (
        form
        + (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


@dataclass
class Case:
    name: str
    what: str
    path: str  # "{run}" is replaced by the reference run's id
    body: bytes
    headers: dict[str, str]


def cases(args: argparse.Namespace) -> list[Case]:
    size, body = args.size_mib * MIB, args.body_mib * MIB
    try:
        from accelboard.importers.inputs import MAX_MEMBER_BYTES  # type: ignore[attr-defined]
    except ImportError:  # before the limit existed
        MAX_MEMBER_BYTES = 32 * MIB
    text_size = min(MAX_MEMBER_BYTES - MIB, size)
    gz = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    built = []

    def upload(
        name: str, what: str, filename: str, data: bytes, field: str = "file", path: str = "/api/v1/runs"
    ) -> None:
        payload, content_type = multipart(field, filename, data)
        built.append(
            Case(name, f"{what} ({len(data) / 1024:,.0f} KiB)", path, payload, {"Content-Type": content_type})
        )

    mib = f"{size // MIB:,} MiB"
    upload("zip", f"zip, one member of {mib} zeros", "bomb.zip", zip_member("mlperf_log_detail.txt", size))
    upload("tar_gz", f"tar.gz, one member of {mib} zeros", "bomb.tar.gz",
           tar_member("results/mlperf_log_detail.txt", size, lambda b: gzip.compress(b, 9, mtime=0)))  # fmt: skip
    upload("tar_xz", f"tar.xz, one member of {mib} zeros", "bomb.tar.xz",
           tar_member("results/mlperf_log_detail.txt", size, lambda b: lzma.compress(b, preset=0)))  # fmt: skip
    upload("zip_lines", f"zip, one member of {text_size // MIB} MiB of 3-byte lines", "lines.zip",
           zip_member("results/mlperf_log_detail.txt", text_size, b"ab\n"))  # fmt: skip
    upload("zip_lines_at_limit", f"zip, one member of {LINES_AT_LIMIT:,} 3-byte lines", "lines.zip",
           zip_member("results/mlperf_log_detail.txt", 3 * LINES_AT_LIMIT, b"ab\n"))  # fmt: skip
    json_at_limit = (
        b'{"model_id": "m", "request_throughput": 1.0, "mean_ttft_ms": 1.0, "x": ['
        + b"[]," * VALUES_AT_LIMIT
        + b"[]]}"
    )
    upload("zip_json_at_limit", f"zip, a vLLM result of {VALUES_AT_LIMIT:,} empty arrays", "json.zip",
           zip_bytes("results/vllm-result.json", json_at_limit))  # fmt: skip
    inflated = f"{body // MIB} MiB"
    telemetry = gzip_body([b'{"batch_id": "', (b"x", body - 64), b'", "host": {"name": "h"}}'])
    built.append(Case("gzip_telemetry", f"telemetry, one {inflated} string ({len(telemetry) / 1024:,.0f} KiB gzip)",
                      "/api/v1/telemetry", telemetry, gz))  # fmt: skip
    under = min(body, 31 * MIB)  # under the JSON body's limit (32 MiB) once inflated
    telemetry = gzip_body([b'{"batch_id": "', (b"x", under - 64), b'", "host": {"name": "h"}}'])
    built.append(Case("gzip_telemetry_at_limit", f"telemetry, one {under // MIB} MiB string ({len(telemetry) / 1024:,.0f} KiB gzip)",
                      "/api/v1/telemetry", telemetry, gz))  # fmt: skip
    inference = gzip_body([b'{"batch_id": "b1", "host": "h",', (b" ", body - 64), b'"intervals": []}'])
    built.append(Case("gzip_inference", f"inference metrics padded to {inflated} ({len(inference) / 1024:,.0f} KiB gzip)",
                      "/api/v1/inference-metrics", inference, gz))  # fmt: skip
    containers = gzip_body([b'{"x": [', (b"[],", (body - 64) // 3 * 3), b"[]]}"])
    built.append(Case("gzip_run_containers", f"run JSON of {inflated} of []'s ({len(containers) / 1024:,.0f} KiB gzip)",
                      "/api/v1/runs", containers, gz))  # fmt: skip
    values = gzip_body([b'{"x": [', (b"[],", 3 * (JSON_VALUES_AT_LIMIT - 10)), b"[]]}"])
    built.append(Case("gzip_run_values_at_limit", f"run JSON of {JSON_VALUES_AT_LIMIT - 10:,} []'s ({len(values) / 1024:,.0f} KiB gzip)",
                      "/api/v1/runs", values, gz))  # fmt: skip
    nested = b'{"a":' * args.depth + b"1" + b"}" * args.depth
    trace = (
        b'{"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel", "ts": 0, "dur": 5, "pid": 1, "tid": 1, "args": '
        + nested
        + b"}]}"
    )
    upload("deep_trace", f"profile trace, args nested {args.depth:,} deep", "trace.json", trace,
           field="profile", path="/api/v1/runs/{run}/profile")  # fmt: skip
    only = {name for name in args.only.split(",") if name}
    return [case for case in built if not only or case.name in only]


# --- the server ----------------------------------------------------------------------------------


def workers(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise ProcessLookupError(f"no {field} for {pid}: the process is exiting")


def request(port: int, token: str, case: Case, run: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request(
            "POST",
            case.path.replace("{run}", run),
            body=case.body,
            headers={"Authorization": f"Bearer {token}", **case.headers},
        )
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        return 0, str(exc).encode()
    finally:
        connection.close()


def reference_case() -> Case:
    body, content_type = multipart("file", *REFERENCE, {"accelerator": "H100 SXM 80GB", "count": "8"})
    return Case("reference", "a 2 KiB result", "/api/v1/runs", body, {"Content-Type": content_type})


class Server:
    """gunicorn with the production settings, started once; ``fresh_workers`` replaces its workers
    (forked again from the preloaded master: a second, not a minute of imports), so that each
    measurement starts from workers that nothing before it has grown."""

    def __init__(self, env: dict[str, str], port: int, expected_workers: int) -> None:
        from ingest import wait_for

        self.port, self.expected = port, expected_workers
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "accelboard.wsgi:application",
             "--config", "python:accelboard.gunicorn_conf"],
            cwd=ROOT, env={**env, "GUNICORN_BIND": f"127.0.0.1:{port}"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(port, self.process, timeout=300)
        self._wait_workers(set())

    def _wait_workers(self, old: set[int]) -> list[int]:
        deadline = time.monotonic() + 120
        while True:
            pids = workers(self.process.pid)
            if len(pids) >= self.expected and not old & set(pids):
                return pids
            if time.monotonic() > deadline:
                raise SystemExit("gunicorn did not start its workers")
            time.sleep(0.1)

    def fresh_workers(self, token: str, run: str) -> str:
        """New workers, each warmed by a plain upload (imports, connections); the run's id."""
        old = set(workers(self.process.pid))
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        self._wait_workers(old)
        for _ in range(3 * self.expected):
            status, answer = request(self.port, token, reference_case(), run)
            if not run and status in (200, 201):
                run = json.loads(answer)["runs"][0]["run_id"]
            elif not run:
                print(f"reference upload: HTTP {status} {answer[:300]!r}")
        return run

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def measure(
    server: Server, port: int, token: str, case: Case, run: str, clients: int
) -> tuple[list[int], float]:
    pids = workers(server.process.pid)
    base = {}
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := the current VmRSS
        base[pid] = status_kib(pid, "VmRSS")
    answers: list[int] = []
    said: list[bytes] = []

    def post() -> None:
        status, answer = request(port, token, case, run)
        answers.append(status)
        said.append(answer)

    threads = [threading.Thread(target=post) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    added = 0
    for pid in pids:
        try:
            added += max(0, status_kib(pid, "VmHWM") - base[pid])
        except (
            FileNotFoundError,
            ProcessLookupError,
        ):  # the worker died (killed for its memory, or timed out)
            answers.append(-1)
    if clients == 1 and said:
        print(f"{'':>24}     {said[0][:160].decode(errors='replace')}")
    return sorted(answers), added * 1024 / MB


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    built = cases(args)
    print(f"bodies built in {time.monotonic() - started:.1f} s:")
    for case in built:
        print(f"  {case.name}: {case.what}")
    sys.path.insert(0, str(Path(__file__).parent))
    from ingest import free_port

    sys.path.insert(0, str(ROOT))
    from accelboard import gunicorn_conf

    results: dict[str, dict[int, tuple[list[int], float]]] = {}
    with bench_database("accelboard_bench_bomb") as url:
        from accelboard.core.services import team_create

        team_create(name="Bench", slug="bench")
        env = production_env(url, "memory://")
        token = subprocess.run(
            [sys.executable, "-m", "accelboard.cli", "token", "create", "--team", "bench", "--kind", "read-write"],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        print(
            f"gunicorn: {gunicorn_conf.workers} workers of {gunicorn_conf.threads} threads ({gunicorn_conf.worker_class})"
        )
        run = ""
        server = Server(env, free_port(), gunicorn_conf.workers)
        try:
            for case in built:
                for clients in (1, 4):
                    run = server.fresh_workers(token, run)
                    answers, added = measure(server, server.port, token, case, run, clients)
                    results.setdefault(case.name, {})[clients] = (answers, added)
                    target = TARGET_SINGLE_MB if clients == 1 else TARGET_FOUR_MB
                    print(
                        f"{case.name:>24} x{clients}: HTTP {','.join(map(str, answers))}, "
                        f"workers' peak +{added:,.0f} MB (target {target:,})",
                        flush=True,
                    )
        finally:
            server.close()
    missed = []
    for name, modes in results.items():
        for clients, (answers, added) in modes.items():
            target = TARGET_SINGLE_MB if clients == 1 else TARGET_FOUR_MB
            failed = any(not (200 <= status < 300 or 400 <= status < 500) for status in answers)
            if added > target or failed:
                missed.append(f"{name}x{clients}")
    if missed:
        print(f"target missed: {', '.join(missed)}")
    single = max(modes[1][1] for modes in results.values() if 1 in modes)
    four = max(modes[4][1] for modes in results.values() if 4 in modes)
    print(
        f"max_single_added_mb={single:.0f} max_four_added_mb={four:.0f} "
        f"target_single_mb={TARGET_SINGLE_MB} target_four_mb={TARGET_FOUR_MB} missed={len(missed)}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
