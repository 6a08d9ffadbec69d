"""gunicorn settings for accelboard: `gunicorn accelboard.wsgi --config python:accelboard.gunicorn_conf`
(the image's CMD). Not named gunicorn.conf.py: gunicorn would read that from the working
directory for every server started there (the demo's, the benches').

Workers from the CPU count: ``cores + 1`` processes of ``GUNICORN_THREADS`` (16) threads, capped
at ``GUNICORN_MAX_WORKERS`` (12). A telemetry batch spends about half its time waiting on
PostgreSQL; the threads cover the wait, and fewer processes than the usual ``2 × cores + 1`` (of
2 threads) cost less CPU per request on a busy node (fewer processes to switch between, one poll
loop per process): at 2,000 hosts on 2 cores, 4.3-4.7 ms against 4.6-5.1 ms of web CPU a batch,
p99 447-714 ms against 850-1,229 ms (docs/scaling.md), and ~40 MB less memory. 16 threads rather
than 4: the agents' batches that a process holds at once are stored in one transaction
(``fleet.ingest_group``), so more threads make bigger groups where the node is saturated: at
4,000 hosts, 306 and 196 against 173 and 120 batches a second kept, 4.23 and 5.45 against 5.98
and 7.27 ms of CPU a batch (runs alternated 4, 16, 16, 4; docs/scaling.md). Connections:
workers × threads of PostgreSQL's ``max_connections`` (on 2 cores: 3 workers, 48 connections;
docker-compose's PostgreSQL allows 250).
``WEB_CONCURRENCY`` overrides the count.
"""

from __future__ import annotations

import gc
import os
from typing import Any


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this container may use, not the host's
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    number = int(value)
    if number < 1:
        raise ValueError(f"{name}={value!r} must be at least 1")
    return number


workers = _int("WEB_CONCURRENCY", min(_cores() + 1, _int("GUNICORN_MAX_WORKERS", 12)))
threads = _int("GUNICORN_THREADS", 16)
# gunicorn's gthread worker, its heartbeat file written at most once a second instead of on every
# pass of its loop (gunicorn_worker.py).
worker_class = "accelboard.gunicorn_worker.ThreadWorker"
bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# The largest telemetry batch (10,000 samples) is stored in well under a second; 60 s is for
# the slowest page and an upload's archive.
timeout = 60
graceful_timeout = 20
# An agent keeps one connection to the server and posts on it every 10 s (its sender; an HTTPS
# connection costs the server a TLS handshake, and a new TCP connection ~1.2 ms of web CPU, per
# batch): an idle connection is kept ``GUNICORN_KEEPALIVE`` (20) seconds, longer than that
# interval, else it would be closed between two posts. A proxy in front must keep it as long.
keepalive = _int("GUNICORN_KEEPALIVE", 20)
# The gthread worker counts each open connection, idle ones waiting for their next request
# included, against ``worker_connections`` (gunicorn's default 1,000) and stops accepting at it:
# a fleet of 4,000 hosts over 3 workers holds ~1,350 a worker. ``GUNICORN_WORKER_CONNECTIONS``
# (4,096) a worker; the process's open-file limit (``ulimit -n``) must be above it.
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 4096)
# A worker that grew (a large upload, a big export, a burst of full batches) is replaced once its
# resident memory is ``GUNICORN_MAX_WORKER_GROWTH_MB`` (768) above what it had when it forked, so
# memory goes back to its baseline after a burst (``post_request`` below). Not after a count of
# requests: a new worker starts cold (its PostgreSQL connections, their backends' caches, each
# host's registration on its first batch), and at 2,000 hosts 5,000 requests were 75 s of a
# worker's life: a restart every 25 s on the node, with the slowest posts around them (90 s runs
# back to back, docs/scaling.md: p99 344 against 209 ms, 109 posts over 500 ms against 1). The
# request count stays as a backstop; jitter keeps the workers from restarting together.
max_requests = _int("GUNICORN_MAX_REQUESTS", 200_000)
max_requests_jitter = max_requests // 10
# Above what a worker holds by design: remote-write's label cache keeps up to 500,000 series
# (``PROMETHEUS_SERIES_CACHE``, ~500 bytes each); at 256 MB a worker holding a 2,000-host fleet's
# 288,000 was replaced again and again, each new one decoding every series anew (web CPU 0.62
# cores in bench/remote_write.py's fleet run against 0.26).
MAX_WORKER_GROWTH_MB = _int("GUNICORN_MAX_WORKER_GROWTH_MB", 768)
# The resident memory is read every this many requests of a worker (a read of /proc is ~10 µs).
GROWTH_CHECK_EVERY = 32
# gunicorn answers a request past these limits itself, with an HTML page; they are set a little
# above the limits that ``core.middleware.RequestLimits`` enforces (gunicorn's defaults: a
# 4,094-byte request line, 100 header fields of 8,190 bytes), so that a client gets its 414 or
# 431 from the application: in the API's JSON error shape on /api/, as plain text elsewhere.
# 8,190 is the most gunicorn allows for the request line.
limit_request_line = 8190
limit_request_fields = 200
limit_request_field_size = 16380
accesslog = "-"
errorlog = "-"
# The same access line as gunicorn's, without the dict of every header and environ variable that
# gunicorn builds for each request to fill it (~0.2 ms of an agent's post; gunicorn_logging.py).
logger_class = "accelboard.gunicorn_logging.AccessLogger"
# Django, every view module and their libraries (pandas, plotly, numpy) are imported once in the
# master and shared by the forked workers: without it each worker imported them on its first
# request (seconds of CPU on 2 cores, while agents' requests waited past their 10 s timeout) and
# held its own copy (~200 MB each).
preload_app = True


def when_ready(server: object) -> None:
    """In the master, after the app is loaded and before the workers fork: import every view
    (the URLconf is otherwise loaded on the first request), then close any database connection
    so that no socket is shared between workers."""
    from django.db import connections
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - importing is the point
    # What views import only when first needed (each ~0.5-1 s of CPU), so that a CLI or worker
    # process does not pay for them: here once, shared by the workers.
    import openpyxl  # noqa: F401
    import scipy.ndimage  # noqa: F401
    import scipy.stats  # noqa: F401

    connections.close_all()
    collector_settle()


# The cyclic collector's first threshold (Python's default 700): a remote-write request of 2,000
# series holds ~6,000 new container objects at its peak (a ``Series``, its list and tuple each),
# so at 700 each one ran ~10 young collections, ~1 middle one and every ~12th request a full one
# of all the worker's objects since the fork (the label cache's among them): 3.1-3.5 ms of its
# ~23 ms of web CPU. Its objects are freed by their reference counts as it ends, so at 10,000 a
# request starts and ends below the threshold and the collector rarely runs (0-0.15 ms a request,
# docs/scaling.md, 2026-12-07); the garbage of a cycle waits a little longer for its collection.
GC_YOUNG_THRESHOLD = 10_000


def collector_settle() -> None:
    """In the master before the workers fork (``when_ready``): what it loaded (Django, the views,
    their libraries: ~290,000 objects the cyclic collector tracks) lives as long as the workers:
    frozen, a worker's full collections do not walk it (nor write to its pages, which stay
    shared); and the young generation's threshold raised (``GC_YOUNG_THRESHOLD``), inherited by
    the workers."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _resident_mb() -> float:
    """This process's resident memory (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def post_fork(server: object, worker: Any) -> None:
    """In a new worker: its resident memory at birth (the master's pages it shares included), the
    baseline its growth is measured from."""
    worker.accelboard_resident_mb = _resident_mb()
    worker.accelboard_requests = 0


def post_request(worker: Any, req: object, environ: object, resp: object) -> None:
    """In a worker, after each request: freeze the remote-write label cache's new entries once
    it has grown (``remote_write.label_cache_freeze``), so that full collections do not walk its
    ~288,000 series (each one ~0.4 s of CPU at that size, one request in ~100); and every
    ``GROWTH_CHECK_EVERY`` requests, end the worker once it has grown ``MAX_WORKER_GROWTH_MB``
    (after the requests it is serving, as gunicorn ends one at ``max_requests``; the master
    forks a new one)."""
    from accelboard.fleet.remote_write import label_cache_freeze

    label_cache_freeze()
    worker.accelboard_requests = getattr(worker, "accelboard_requests", 0) + 1
    if worker.accelboard_requests % GROWTH_CHECK_EVERY:
        return
    grown = _resident_mb() - getattr(worker, "accelboard_resident_mb", 0.0)
    if grown > MAX_WORKER_GROWTH_MB and worker.alive:
        worker.log.warning(
            "Replacing worker after %d requests: it grew %.0f MB (GUNICORN_MAX_WORKER_GROWTH_MB=%d)",
            worker.accelboard_requests,
            grown,
            MAX_WORKER_GROWTH_MB,
        )
        worker.alive = False
