"""The agents' ingest endpoint past the middleware it does not need (docs/scaling.md).

``POST /api/v1/telemetry`` is most of a fleet's requests: one per host every 10 s. It is called
with a Bearer token, never a browser session, so the session, CSRF, authentication, messages,
login-required and django-axes middleware read and add nothing for it, and WhiteNoise serves
only ``/static/``; running them cost ~0.3 ms of a batch's web CPU. ``LeanHandler`` is Django's
WSGI handler with the chain cut to ``LEAN_MIDDLEWARE``, which keeps every middleware whose
check or header the endpoint's answers carry: the request limits (414/431), the security
headers and HTTPS redirect, the readiness gate (503 until migrated), ``X-Frame-Options`` and the
Content-Security-Policy. After the chain, the endpoint's view is called directly
(``views.telemetry_direct``): no URL resolution and no ninja dispatch, the same token check,
body limits, service, answer and error shapes (~0.25 ms of web CPU a batch less,
docs/scaling.md). ``ingest_dispatch`` sends only this method and path there, every other request
to the full chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from accelboard.api.views import telemetry_direct

# The requests that take the lean chain: (method, PATH_INFO).
LEAN_ROUTES = frozenset({("POST", "/api/v1/telemetry")})
# The middleware kept for them, in settings.MIDDLEWARE's order (the others are left out).
LEAN_MIDDLEWARE = (
    "accelboard.core.middleware.RequestLimits",
    "django.middleware.security.SecurityMiddleware",
    "accelboard.core.readiness.ReadinessGate",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "accelboard.core.middleware.ContentSecurityPolicyMiddleware",
)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class LeanHandler(WSGIHandler):
    """Django's WSGI handler whose middleware chain is ``settings.MIDDLEWARE`` less what is not in
    ``LEAN_MIDDLEWARE`` (signals, connections and exception handling as in any request), and
    without the connection's health check (``CONN_HEALTH_CHECKS``: a ``SELECT 1`` round trip
    before the first query of every request on a reused connection). A connection that broke
    since its last request fails this one (a 500, and Django closes it at the request's end):
    the agent retries the batch under its id, and the retry, on a new connection, stores it
    once. Nothing is acknowledged that is not committed."""

    def __init__(self, *, direct: bool = True) -> None:
        self.direct = direct
        super().__init__()

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        connection.health_check_done = True  # type: ignore[attr-defined]  # not in django-stubs
        return super().get_response(request)

    def _get_response(self, request: HttpRequest) -> HttpResponseBase:
        """The view, past the chain: ``LEAN_ROUTES`` have one, so it is called without resolving
        the URL (``direct=False``: resolved and dispatched by ninja as on the full path)."""
        if not self.direct:
            return super()._get_response(request)  # type: ignore[misc]  # not in django-stubs
        return telemetry_direct(request)

    def load_middleware(self, is_async: bool = False) -> None:
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = [path for path in full if path in LEAN_MIDDLEWARE]
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


def ingest_dispatch(full: WSGIApp, *, direct: bool = True) -> WSGIApp:
    """A WSGI application: ``LEAN_ROUTES`` to a ``LeanHandler``, anything else to ``full``."""
    lean = LeanHandler(direct=direct)

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if (environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")) in LEAN_ROUTES:
            return lean(environ, start_response)
        return full(environ, start_response)

    return application
