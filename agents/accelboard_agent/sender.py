"""Delivery of the spool's outbox to the server, in a background thread.

1. Each round seals raw samples into telemetry batches (at most ``MAX_SEALED_AHEAD`` unsent, so a
   long outage leaves samples raw, where the cap policy can drop the oldest), then POSTs every
   due outbox row, gzip-compressed, with ``Authorization: Bearer``.
2. 2xx (including ``"duplicate": true``): the row is deleted. 5xx, 408, 425, 429 and network
   errors: the row stays and is retried after an exponential backoff with jitter. 401 and 403
   also retry (a wrong token is fixed by the operator; dropping the data for it would be worse).
   Any other 4xx: the server said this payload will never be accepted; it is dropped, logged
   and counted (``rejected_batches``).
3. After a network error the round stops: the next rows would meet the same dead server.
4. Telemetry is posted on one kept HTTP/1.1 connection to the server (``KeptConnections``), not
   a new one (and, over HTTPS, a new TLS handshake) every batch; where the environment names a
   proxy for the server, through urllib as before.
"""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import os
import random
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from . import __version__
from .spool import PROFILE, Spool

log = logging.getLogger("accelboard_agent.sender")

MAX_SEALED_AHEAD = 2
# How often an idle sender truncates the spool's WAL.
WAL_CHECKPOINT_INTERVAL_S = 60.0
RETRY_STATUSES = {401, 403, 408, 425, 429}


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Delay before retry number ``attempt`` (1-based): exponential, capped, "equal jitter".

    Half the delay is fixed and half random, so a fleet that lost the server at the same moment
    does not come back in lockstep, and no retry comes sooner than half the nominal delay.
    """
    uniform = rng.uniform if rng is not None else random.uniform
    nominal = min(cap, base * (2 ** max(0, attempt - 1)))
    return nominal / 2 + uniform(0, nominal / 2)


# A post on a kept connection that fails with one of these, before any byte of the answer, found
# the connection closed by the server while it was idle (its keep-alive ran out, it restarted).
_CLOSED_WHILE_IDLE = (
    http.client.RemoteDisconnected,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
)


class KeptConnections:
    """The agent's HTTP/1.1 connections, one per server (scheme, host, port), each kept open
    between posts (the server keeps an idle one ``GUNICORN_KEEPALIVE`` seconds, longer than the
    agent's interval). A connection is taken out while a post uses it, so threads never share
    one. HTTPS is verified as urllib verifies it (``http.client``'s default context: the
    system's trust store, the host name checked)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str], http.client.HTTPConnection] = {}

    def post(
        self, scheme: str, netloc: str, path: str, *, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes]:
        """POST on the kept connection to ``netloc`` (a new one if none); return (status, body).
        Network failures raise ``OSError`` (``http.client.HTTPException`` for a garbled answer,
        as through urllib)."""
        key = (scheme, netloc)
        with self._lock:
            conn = self._idle.pop(key, None)
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                response = self._send(conn, path, body, headers)
            except _CLOSED_WHILE_IDLE:
                # The server closed the kept connection before this post reached it: tried once
                # more, at once, on a new one. Safe even had it been stored: a batch is
                # idempotent by its batch id (the server answers a repeat "duplicate": true).
                conn.close()
                conn = None
        if conn is None:
            conn = self._open(scheme, netloc, timeout)
            response = self._send(conn, path, body, headers)
        try:
            answer = response.read()
        except BaseException:
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            with self._lock:
                stale = self._idle.pop(key, None)
                self._idle[key] = conn
            if stale is not None:
                stale.close()
        return response.status, answer

    @staticmethod
    def _open(scheme: str, netloc: str, timeout: float) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(netloc, timeout=timeout)
        return http.client.HTTPConnection(netloc, timeout=timeout)

    @staticmethod
    def _send(
        conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        try:
            conn.request("POST", path, body=body, headers=headers)
            return conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close every kept connection (the next post opens a new one)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for conn in idle:
            conn.close()


CONNECTIONS = KeptConnections()


def _direct(parts: urllib.parse.SplitResult) -> bool:
    """Whether urllib would reach this URL without a proxy (``*_proxy`` / ``no_proxy``)."""
    if parts.scheme not in ("http", "https") or "@" in parts.netloc or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    return parts.scheme not in proxies or bool(urllib.request.proxy_bypass(parts.netloc))


def http_post(url: str, *, token: str, payload: str, timeout: float) -> tuple[int, str]:
    """POST a JSON document (gzip); return (status, body). Network failures raise ``OSError``.
    On the kept connection to the server (``CONNECTIONS``), or through urllib where it would use
    a proxy."""
    body = gzip.compress(payload.encode("utf-8"), compresslevel=5)
    headers = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "Authorization": f"Bearer {token}",
        "User-Agent": f"accelboard-agent/{__version__}",
    }
    parts = urllib.parse.urlsplit(url)
    if _direct(parts):
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        status, answer = CONNECTIONS.post(
            parts.scheme, parts.netloc, path, body=body, headers=headers, timeout=timeout
        )
        return status, answer.decode("utf-8", "replace")
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


# Traces are large: their upload gets longer than a telemetry batch.
PROFILE_TIMEOUT_S = 600.0


def http_post_files(url: str, *, token: str, files: list[str], timeout: float) -> tuple[int, str]:
    """POST trace files as multipart ``profile`` parts (gzip-compressed unless they already are),
    streamed from a temporary file so a trace of any size needs little memory. Raises
    ``FileNotFoundError`` when a file is gone, ``OSError`` on network failures."""
    boundary = f"accelboard-{uuid.uuid4().hex}"
    with tempfile.TemporaryFile() as body:
        for path in files:
            name = os.path.basename(path)
            with open(path, "rb") as source:
                gzipped = source.read(2) == b"\x1f\x8b"
                source.seek(0)
                filename = name if gzipped else name + ".gz"
                safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
                body.write(
                    f'--{boundary}\r\nContent-Disposition: form-data; name="profile"; filename="{safe}"\r\n'
                    "Content-Type: application/octet-stream\r\n\r\n".encode()
                )
                if gzipped:
                    shutil.copyfileobj(source, body)
                else:
                    with gzip.GzipFile(fileobj=body, mode="wb", compresslevel=5) as packed:
                        shutil.copyfileobj(source, packed)
                body.write(b"\r\n")
        body.write(f"--{boundary}--\r\n".encode())
        length = body.tell()
        body.seek(0)
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(length),
                "Authorization": f"Bearer {token}",
                "User-Agent": f"accelboard-agent/{__version__}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")


def _error_message(status: int, body: str) -> str:
    try:
        error = json.loads(body).get("error") or {}
        detail = f"{error.get('code', '')}: {error.get('message', '')} at {error.get('path', '')}"
    except (ValueError, AttributeError):
        detail = body[:200]
    return f"HTTP {status} {detail}".strip()


class Sender:
    """Sends the outbox of one spool; ``run`` loops until ``stop`` is set, ``send_once`` is one round."""

    def __init__(
        self,
        *,
        spool: Spool,
        server: str,
        token: str,
        hostname: str,
        batch_max_samples: int = 5000,
        send_interval: float = 5.0,
        backoff_base: float = 1.0,
        backoff_max: float = 300.0,
        timeout: float = 10.0,
        stop: threading.Event | None = None,
        attribution_cut_interval: float = 300.0,
    ) -> None:
        self.spool = spool
        self.server = server.rstrip("/")
        self.token = token
        self.hostname = hostname
        self.batch_max_samples = batch_max_samples
        self.send_interval = send_interval
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.attribution_cut_interval = attribution_cut_interval
        self.stop = stop or threading.Event()
        # After a failed send the whole server is presumed away until then (monotonic seconds).
        self.pause_until = 0.0

    def seal(self, *, everything: bool = False) -> int:
        """Seal batches of the spooled samples; ``everything`` (``flush``): all of them, and every
        open attribution interval's part so far, however short."""
        sealed = 0
        cut_after = 0.0 if everything else self.attribution_cut_interval
        while everything or self.spool.outbox_pending("telemetry") < MAX_SEALED_AHEAD:
            sealed_id = self.spool.telemetry_seal(
                hostname=self.hostname, max_samples=self.batch_max_samples, cut_after=cut_after
            )
            if sealed_id is None:
                break
            sealed += 1
        return sealed

    def send_once(self, *, everything: bool = False) -> dict[str, int]:
        """Seal and send what is due; return counts of sent, rejected and retried rows."""
        counts = {"sent": 0, "rejected": 0, "retry": 0}
        self.seal(everything=everything)
        for row in self.spool.outbox_due():
            if self.stop.is_set() and not everything:
                break
            outcome = self._send_row(row)
            counts[outcome] += 1
            if outcome == "retry":
                break
            if not everything:
                self.seal()
        return counts

    def send_client(self, client_id: str) -> str:
        """Send one queued row now (``bench`` uploading its run); "sent", "rejected", "retry" or "absent"."""
        row = self.spool.outbox_get(client_id)
        if row is None:
            return "absent"
        return self._send_row(row)

    def _send_row(self, row: dict[str, Any]) -> str:
        url = self.server + row["endpoint"]
        try:
            if row["kind"] == PROFILE:
                files = json.loads(row["payload"])["files"]
                timeout = max(self.timeout, PROFILE_TIMEOUT_S)
                status, body = http_post_files(url, token=self.token, files=files, timeout=timeout)
            else:
                status, body = http_post(url, token=self.token, payload=row["payload"], timeout=self.timeout)
        except FileNotFoundError as exc:  # the trace was deleted before it could be sent
            message = f"profile file gone: {exc.filename}"
            log.error("dropping %s %s: %s", row["kind"], row["client_id"], message)
            self.spool.outbox_reject(seq=row["seq"], items=row["items"], error=message)
            return "rejected"
        except OSError as exc:  # URLError, connection refused/reset, timeouts
            reason = getattr(exc, "reason", exc)
            return self._retry(row, f"network error: {reason}")
        if 200 <= status < 300:
            self.spool.outbox_done(seq=row["seq"], items=row["items"])
            return "sent"
        message = _error_message(status, body)
        if status >= 500 or status in RETRY_STATUSES:
            return self._retry(row, message)
        log.error(
            "server rejected %s %s (%d items), dropping it: %s",
            row["kind"],
            row["client_id"],
            row["items"],
            message,
        )
        self.spool.outbox_reject(seq=row["seq"], items=row["items"], error=message)
        return "rejected"

    def _retry(self, row: dict[str, Any], message: str) -> str:
        delay = backoff_delay(row["attempts"] + 1, base=self.backoff_base, cap=self.backoff_max)
        log.warning(
            "sending %s %s failed (%s); retry in %.1f s", row["kind"], row["client_id"], message, delay
        )
        self.spool.outbox_retry(seq=row["seq"], delay=delay, error=message)
        self.pause_until = time.monotonic() + delay
        return "retry"

    def run(self) -> None:
        # A (re)started agent owes the server no backoff from its previous life: the server may
        # have been back for minutes, and a batch still waiting out a stored 2-minute delay would
        # arrive after newer ones.
        self.spool.outbox_backoff_reset()
        last_checkpoint = time.monotonic()
        while not self.stop.is_set():
            try:
                self.send_once()
                # Idle (nothing queued) and a while since the last one: cut the WAL back, so the
                # spool file does not grow with every sample tick.
                if time.monotonic() - last_checkpoint >= WAL_CHECKPOINT_INTERVAL_S and not (
                    self.spool.outbox_pending()
                ):
                    self.spool.wal_checkpoint()
                    last_checkpoint = time.monotonic()
            except Exception:  # the sender must outlive any one bad round (disk full, bad row)
                log.exception("send round failed")
            wait = self.send_interval
            next_try = self.spool.outbox_next_try()
            if next_try is not None:
                wait = min(wait, max(0.05, next_try - time.time()))
            wait = max(wait, self.pause_until - time.monotonic())
            self.stop.wait(wait)
