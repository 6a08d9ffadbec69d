"""A stand-in for the kubelet's HTTP(S) API: ``GET /pods`` answers a ``PodList`` as the kubelet
does (the pods scripted), 401 without the expected bearer token; it can go away and come back on
the same port, and serve TLS with a certificate made at test time (``certificates``).

Not a test module: ``test_kubelet_pods.py`` and ``test_podresources.py`` import it.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def pod(
    namespace: str,
    name: str,
    uid: str,
    *,
    labels: dict[str, str] | None = None,
    containers: dict[str, str] | None = None,
    init_containers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One item of the kubelet's ``/pods``: ``containers`` maps a container's name to its
    runtime id (hex), as ``status.containerStatuses`` carries them (``containerd://<id>``)."""
    containers = containers or {}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": "4711",
        "creationTimestamp": "2025-11-30T08:00:00Z",
        "annotations": {"kubernetes.io/config.seen": "2025-11-30T08:00:01.123456789Z"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name.rsplit("-", 1)[0]}],
    }
    if labels is not None:
        metadata["labels"] = labels

    def statuses(items: dict[str, str]) -> list[dict[str, Any]]:
        return [
            {
                "name": container,
                "state": {"running": {"startedAt": "2025-11-30T08:00:05Z"}},
                "ready": True,
                "restartCount": 0,
                "image": "registry.example.com/app:1.0",
                "imageID": "registry.example.com/app@sha256:" + "e" * 64,
                "containerID": f"containerd://{container_id}",
            }
            for container, container_id in items.items()
        ]

    status: dict[str, Any] = {
        "phase": "Running",
        "hostIP": "10.0.0.7",
        "podIP": "10.244.1.23",
        "qosClass": "Burstable",
        "containerStatuses": statuses(containers),
    }
    if init_containers:
        status["initContainerStatuses"] = statuses(init_containers)
    return {
        "metadata": metadata,
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [
                {
                    "name": c,
                    "image": "registry.example.com/app:1.0",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
                for c in containers
            ],
        },
        "status": status,
    }


def pod_list(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class KubeletHttp:
    """``GET /pods`` as the kubelet answers it. ``token``: the bearer token it accepts (None:
    any request, as the read-only port); ``tls``: (certificate file, key file) to serve https."""

    def __init__(self, *, token: str | None = None, tls: tuple[str, str] | None = None) -> None:
        self.token = token
        self.tls = tls
        self.pods: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/pods"

    def start(self) -> None:
        kubelet = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with kubelet._lock:
                    kubelet.requests.append({"path": self.path, "headers": dict(self.headers)})
                    pods = list(kubelet.pods)
                if (
                    kubelet.token is not None
                    and self.headers.get("Authorization") != f"Bearer {kubelet.token}"
                ):
                    self._reply(401, b"Unauthorized\n", "text/plain; charset=utf-8")
                elif self.path != "/pods":
                    self._reply(404, b"404 page not found\n", "text/plain; charset=utf-8")
                else:
                    self._reply(200, json.dumps(pod_list(pods)).encode(), "application/json")

        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._httpd = httpd

    def stop(self) -> None:
        """Go away: the port refuses connections until ``start`` again."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def tokens(self) -> list[str]:
        with self._lock:
            return [r["headers"].get("Authorization", "") for r in self.requests]


def certificates(folder: Path) -> dict[str, str] | None:
    """A CA and a server certificate for 127.0.0.1 signed by it, made with ``openssl`` (None
    where it is not installed): paths ``ca``, ``cert``, ``key`` and ``other_ca`` (a CA that
    signed nothing here)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=folder)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        run(
            "req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN=test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=gpu-node-1")
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    run(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
    )  # fmt: skip
    return {
        "ca": str(folder / "ca.pem"),
        "other_ca": str(folder / "other-ca.pem"),
        "cert": str(folder / "server.pem"),
        "key": str(folder / "server.key"),
    }
