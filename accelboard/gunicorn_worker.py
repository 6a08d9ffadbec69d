"""gunicorn's threaded worker with two system calls' worth less per connection
(``gunicorn_conf.worker_class``; measured in docs/scaling.md, issue 37).

An agent posts each batch on a new connection (its urllib sends ``Connection: close``), so the
work gunicorn does per connection is paid per batch. Two parts of it cost more than they need to:

1. Before a worker thread reads a new connection, gunicorn waits (up to 5 s) for its first bytes
   with a temporary ``selectors.DefaultSelector``: an epoll instance created, the socket
   registered, waited on and the instance closed, four system calls and their Python objects for
   every connection, though the request's bytes are nearly always there already. ``PeekedConn``
   first peeks at the socket without blocking (one ``recv(MSG_PEEK)``): data there (or the peer
   gone, which the parser then reports as before) is ready at once; otherwise gunicorn's own wait
   as before. A TLS socket (which cannot peek) always takes gunicorn's wait.
2. The main loop tells the arbiter it is alive (``notify``: an ``os.utime`` of its heartbeat file)
   on every pass, i.e. for every accepted connection and every finished request. The arbiter
   only checks it against ``timeout`` (60 s); ``ThreadWorker`` writes it at most every
   ``NOTIFY_EVERY_S`` (the loop passes at least once a second when idle, so the file is never
   more than ~2 s old).
"""

from __future__ import annotations

import errno
import socket
import time
from typing import Any

from gunicorn.workers import gthread

# The heartbeat's most frequent write (the arbiter ends a worker silent for ``timeout``, 60 s).
NOTIFY_EVERY_S = 1.0


class PeekedConn(gthread.TConn):
    """gunicorn's connection whose wait for the first bytes is one non-blocking peek when they
    are already there."""

    def wait_for_data(self, timeout: float) -> bool:
        if self.data_ready:  # type: ignore[has-type]  # gunicorn's attribute, untyped
            return True
        if not self.cfg.is_ssl:
            try:
                self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except OSError:  # nothing yet (EAGAIN), or an error gunicorn's wait reports as before
                pass
            else:  # bytes, or the peer's end of stream: readable, as the selector would say
                self.data_ready = True
                return True
        return bool(super().wait_for_data(timeout))


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's ``gthread`` worker: its connections are ``PeekedConn``, its heartbeat written
    at most every ``NOTIFY_EVERY_S``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._notified_at = float("-inf")

    def notify(self) -> None:
        now = time.monotonic()
        if now - self._notified_at < NOTIFY_EVERY_S:
            return
        self._notified_at = now
        super().notify()

    def accept(self, listener: socket.socket) -> None:
        """gunicorn's ``accept`` (27.0), with a ``PeekedConn`` for the new connection."""
        try:
            client_sock, client_addr = listener.accept()
            self.nr_conns += 1
            client_sock.setblocking(True)
            conn = PeekedConn(self.cfg, client_sock, client_addr, listener.getsockname())
            self.enqueue_req(conn)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
