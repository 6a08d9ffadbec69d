"""gunicorn's threaded worker, its heartbeat written at most once a second
(``gunicorn_conf.worker_class``; measured in docs/scaling.md, issue 37).

The main loop of gunicorn's ``gthread`` worker tells the arbiter it is alive (``notify``: an
``os.utime`` of its heartbeat file) on every pass, i.e. for every accepted connection and every
finished request, and an agent opens a connection for each batch. The arbiter only compares the
file's time with ``timeout`` (60 s). ``ThreadWorker`` writes it at most every ``NOTIFY_EVERY_S``;
the loop passes at least once a second when idle, so the file is never more than ~2 s old.
"""

from __future__ import annotations

import time
from typing import Any

from gunicorn.workers import gthread

# The heartbeat's most frequent write (the arbiter ends a worker silent for ``timeout``, 60 s).
NOTIFY_EVERY_S = 1.0


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's ``gthread`` worker whose heartbeat is written at most every ``NOTIFY_EVERY_S``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._notified_at = float("-inf")

    def notify(self) -> None:
        now = time.monotonic()
        if now - self._notified_at < NOTIFY_EVERY_S:
            return
        self._notified_at = now
        super().notify()
