"""Peak memory of the server while it refuses archive bombs, against an ordinary upload.

1. Creates ``accelboard_bench_bomb`` (see ``common.bench_database``), a team and a read-write token
   (``accelboard token create``, the real command).
2. Builds, before the clock starts: a zip holding one member of ``--size-mib`` MiB of zeros
   (about 1 MiB compressed), a tar.xz holding the same (about 150 KiB), and a small real result
   file as the reference upload.
3. Starts gunicorn with one sync worker and, for each upload, resets the worker's peak resident
   memory (``/proc/<pid>/clear_refs``), posts the file to ``POST /api/v1/runs`` as multipart and
   reads the peak (``VmHWM``) once the answer is in.

Target: each bomb is refused with a 4xx and raises the worker's peak by less than 64 MiB over the
reference upload's peak. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import io
import lzma
import os
import subprocess
import sys
import tarfile
import time
import uuid
import zipfile
from pathlib import Path

from common import ROOT, bench_database, quick_parse

MIB = 1024 * 1024
TARGET_MIB = 64
# An ordinary upload: a vLLM benchmark result from the importers' fixtures (2 KiB).
REFERENCE = ("vllm_2025.json", (ROOT / "tests" / "importers" / "fixtures" / "vllm_2025.json").read_bytes())


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1000, help="uncompressed size of the bomb's member")
    parser.add_argument("--port", type=int, default=0, help="port for gunicorn (default: a free one)")
    return quick_parse(parser, size_mib=4)


def zip_bomb(size: int) -> bytes:
    out = io.BytesIO()
    chunk = bytes(MIB)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("mlperf_log_detail.txt", "w", force_zip64=True) as member:
            for _ in range(size // MIB):
                member.write(chunk)
    return out.getvalue()


def tar_xz_bomb(size: int) -> bytes:
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        info = tarfile.TarInfo("results/mlperf_log_detail.txt")
        info.size = size
        archive.addfile(info, _Zeros(size))
    return lzma.compress(tar.getvalue(), preset=0)


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


def multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def worker_pid(master: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.2)
    raise SystemExit("gunicorn started no worker")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmHWM in /proc: this benchmark needs Linux")


def peak_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def post(port: int, token: str, name: str, data: bytes) -> int:
    import http.client

    body, content_type = multipart(name, data)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request(
        "POST",
        "/api/v1/runs",
        body=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
    )
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def measure(pid: int, port: int, token: str, name: str, data: bytes) -> tuple[int, float]:
    peak_reset(pid)
    status = post(port, token, name, data)
    return status, peak_rss_mib(pid)


def main() -> int:
    args = parse_args()
    size = args.size_mib * MIB
    started = time.monotonic()
    bombs = {"zip": ("bomb.zip", zip_bomb(size)), "tar.xz": ("bomb.tar.xz", tar_xz_bomb(size))}
    print(
        f"bombs built in {time.monotonic() - started:.1f} s: "
        + ", ".join(
            f"{kind} {len(data) / 1024:,.0f} KiB -> {args.size_mib:,} MiB"
            for kind, (_, data) in bombs.items()
        )
    )
    with bench_database("accelboard_bench_bomb") as url:
        from accelboard.core.services import team_create

        team_create(name="Bench", slug="bench")
        env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": "memory://", "LOG_LEVEL": "WARNING"}
        token = subprocess.run(
            [sys.executable, "-m", "accelboard.cli", "token", "create", "--team", "bench", "--kind", "read-write"],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        sys.path.insert(0, str(Path(__file__).parent))
        from ingest import free_port, wait_for

        port = args.port or free_port()
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "accelboard.wsgi:application",
             f"--bind=127.0.0.1:{port}", "--workers=1", "--timeout=600", "--log-level=warning"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            wait_for(port, server)
            pid = worker_pid(server.pid)
            post(port, token, *REFERENCE)  # warm: imports, connections, first queries
            ref_status, ref_peak = measure(pid, port, token, *REFERENCE)
            print(f"reference upload: HTTP {ref_status}, worker peak {ref_peak:,.0f} MiB")
            results = {}
            for kind, (name, data) in bombs.items():
                status, peak = measure(pid, port, token, name, data)
                results[kind] = (status, peak)
                print(
                    f"{kind} bomb: HTTP {status}, worker peak {peak:,.0f} MiB ({peak - ref_peak:+,.0f} MiB)"
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
    missed = [
        kind
        for kind, (status, peak) in results.items()
        if not 400 <= status < 500 or peak - ref_peak >= TARGET_MIB
    ]
    if missed:
        print(f"target missed ({', '.join(missed)}): a 4xx with the peak under reference + {TARGET_MIB} MiB")
    figures = " ".join(f"{kind.replace('.', '_')}_peak_mib={peak:.0f}" for kind, (_, peak) in results.items())
    print(f"reference_peak_mib={ref_peak:.0f} {figures} target_extra_mib={TARGET_MIB}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
