"""The sender's kept connection (``sender.KeptConnections``) against a real loopback HTTP/1.1
server that keeps connections open: posts share one connection; one the server closed while
idle is replaced, the post tried once more and stored once; a proxy in the environment keeps
urllib's path."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import ssl
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from accelboard_agent.sender import Sender, http_post
from accelboard_agent.spool import Spool


class KeepAliveServer:
    """An HTTP/1.1 server (a thread per connection) that records each request with the
    connection it came on, answers 200 with ``Content-Length`` and keeps the connection."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections.append(self.connection)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(gzip.decompress(raw))
                with server.lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "connection": server.connections.index(self.connection),
                            "headers": dict(self.headers),
                            "batch_id": body.get("batch_id"),
                        }
                    )
                data = json.dumps({"batch_id": body.get("batch_id"), "duplicate": False}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close_idle(self) -> None:
        """Close every connection, as a server does once its keep-alive ran out."""
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def keepalive_server():
    server = KeepAliveServer()
    yield server
    server.stop()


def _post(url: str, batch_id: str, token: str = "t") -> tuple[int, str]:
    payload = json.dumps({"batch_id": batch_id, "samples": []})
    return http_post(url + "/api/v1/telemetry", token=token, payload=payload, timeout=5.0)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_two_posts_share_one_connection(keepalive_server):
    first = _post(keepalive_server.url, "b1")
    second = _post(keepalive_server.url, "b2")

    assert first[0] == second[0] == 200
    assert [r["batch_id"] for r in keepalive_server.requests] == ["b1", "b2"]
    assert [r["connection"] for r in keepalive_server.requests] == [0, 0]
    assert len(keepalive_server.connections) == 1
    assert keepalive_server.requests[0]["headers"].get("Connection") != "close"


def test_a_connection_the_server_closed_while_idle_is_replaced_and_the_post_stored_once(
    keepalive_server,
):
    assert _post(keepalive_server.url, "b1")[0] == 200
    keepalive_server.close_idle()

    status, body = _post(keepalive_server.url, "b2")

    assert status == 200 and json.loads(body)["batch_id"] == "b2"
    # Each batch reached the server once: the closed connection carried nothing of b2.
    assert [r["batch_id"] for r in keepalive_server.requests] == ["b1", "b2"]
    assert [r["connection"] for r in keepalive_server.requests] == [0, 1]
    assert len(keepalive_server.connections) == 2


def test_the_sender_keeps_its_connection_across_rounds_and_reconnects(keepalive_server, tmp_path):
    spool = Spool(str(tmp_path / "s.db"))
    spool.facts_set(host={"hostname": "h", "facts": {}}, accelerators=[{"uuid": "GPU-a"}])
    sender = Sender(spool=spool, server=keepalive_server.url, token="t", hostname="h", timeout=5.0)
    outcomes = []
    for round_ in range(3):
        spool.samples_add([{"time": float(round_), "gpu": "GPU-a"}])
        outcomes.append(sender.send_once(everything=True))
        if round_ == 1:
            keepalive_server.close_idle()

    assert [o["sent"] for o in outcomes] == [1, 1, 1]
    assert [r["connection"] for r in keepalive_server.requests] == [0, 0, 1]
    assert len({r["batch_id"] for r in keepalive_server.requests}) == 3
    assert spool.outbox_pending() == 0


def test_a_refused_connection_is_a_network_error_as_before(keepalive_server):
    assert _post(keepalive_server.url, "b1")[0] == 200
    url = keepalive_server.url
    keepalive_server.stop()
    keepalive_server.close_idle()

    with pytest.raises(OSError):
        _post(url, "b2")


def test_a_proxy_in_the_environment_keeps_urllibs_path(keepalive_server, monkeypatch):
    # The server stands in for the proxy: urllib sends it the absolute URL, and Connection: close.
    monkeypatch.setenv("http_proxy", keepalive_server.url)
    # urlopen's opener reads the proxies once, when first built (in the agent: at its start).
    monkeypatch.setattr(urllib.request, "_opener", None)

    status, _body = _post("http://accelboard.invalid:8000", "b1")

    assert status == 200
    request = keepalive_server.requests[0]
    assert request["path"] == "http://accelboard.invalid:8000/api/v1/telemetry"
    assert request["headers"].get("Connection") == "close"


def test_a_host_no_proxy_names_is_posted_on_the_kept_connection(keepalive_server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "127.0.0.1")

    assert _post(keepalive_server.url, "b1")[0] == 200
    assert _post(keepalive_server.url, "b2")[0] == 200

    assert [r["path"] for r in keepalive_server.requests] == ["/api/v1/telemetry"] * 2
    assert [r["connection"] for r in keepalive_server.requests] == [0, 0]


def test_https_is_verified_as_urllib_verifies_it(monkeypatch):
    opened = []

    def connect(self) -> None:
        opened.append(self._context)
        raise ConnectionRefusedError("not here")

    monkeypatch.setattr(http.client.HTTPSConnection, "connect", connect)

    with pytest.raises(OSError):
        _post("https://accelboard.invalid", "b1")

    context = opened[0]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


@pytest.mark.parametrize("forced", [None, 422, 401, 503])
def test_the_answer_is_the_same_as_urllibs(server, monkeypatch, forced):
    """(status, body) on the kept connection equal urllib's for the same answer (urllib is
    reached through the environment's proxy: here the same server)."""
    answers = []
    for via_proxy in (False, True):
        if via_proxy:
            monkeypatch.setenv("http_proxy", server.url)
            monkeypatch.setattr(urllib.request, "_opener", None)
        server.forced = [forced] if forced else []
        server.accepted.clear()
        answers.append(_post(server.url, "b1", token="test-token"))

    assert answers[0] == answers[1]
    assert answers[0][0] == (forced or 200)
    assert [r["path"] for r in server.requests] == ["/api/v1/telemetry", server.url + "/api/v1/telemetry"]
