"""Ready means ready: until the database holds every migration, the site says it is starting.

A web process can answer before its database is ready (the demo starts the server while it
migrates; in production a new release's web container can come up before ``migrate`` has run).
Until then a login would be a 500 (``relation "axes_accessattempt" does not exist``) and
``/healthz`` would say "ok". ``ReadinessGate`` answers every request but static files with a 503
instead: ``/healthz`` and the API in JSON (``"status": "starting"``, with the migrations still to
apply), pages with a "starting" page that reloads itself; ``Retry-After`` on all of them.

The check loads Django's migration graph (tens of milliseconds), so a process asks at most once a
second while it is not ready, and never again once it is: migrations are not unapplied under a
running server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

RECHECK_S = 1.0
RETRY_AFTER_S = 2


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = False
        self.checked_at = -RECHECK_S
        self.pending = -1  # migrations still to apply; -1: the database could not be asked


_STATE = _State()


def pending_migrations() -> int:
    """How many migrations the database still lacks (-1 when it cannot be asked)."""
    try:
        executor = MigrationExecutor(connection)
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except DatabaseError:
        return -1


def readiness() -> tuple[bool, int]:
    """(ready, migrations still to apply) for this process, asking the database at most once a
    ``RECHECK_S`` while it is not ready."""
    state = _STATE
    if state.ready:
        return True, 0
    with state.lock:
        now = time.monotonic()
        if not state.ready and now - state.checked_at >= RECHECK_S:
            state.pending = pending_migrations()
            state.ready = state.pending == 0
            state.checked_at = now
        return state.ready, state.pending


def readiness_reset(*, ready: bool = False) -> None:
    """Forget what this process knows: ask the database again at the next request, or (``ready``)
    take it as migrated. For tests, whose database pytest-django migrates before any runs (a
    process never needs it)."""
    with _STATE.lock:
        _STATE.ready = ready
        _STATE.checked_at = -RECHECK_S
        _STATE.pending = 0 if ready else -1


def starting_response(request: HttpRequest, pending: int) -> HttpResponse:
    detail = (
        "the database cannot be reached yet"
        if pending < 0
        else f"{pending} database migration{'' if pending == 1 else 's'} still to apply"
    )
    if request.path.startswith(("/healthz", "/api/")):
        body: dict[str, object] = {"status": "starting", "detail": detail}
        if request.path.startswith("/api/"):
            body = {"error": {"code": "starting", "message": f"accelboard is starting: {detail}", "path": ""}}
        response: HttpResponse = JsonResponse(body, status=503)
    else:
        html = render_to_string("starting.html", {"detail": detail, "retry_after": RETRY_AFTER_S})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


class ReadinessGate:
    """503 "starting" for every request but static files until the database is migrated."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/static/"):
            ready, pending = readiness()
            if not ready:
                return starting_response(request, pending)
        return self.get_response(request)
