"""Login is required everywhere except the login page (and single sign-on's way back), static
files, health, the token API and the signed links of alert emails (unsubscribe, acknowledge,
dismiss) and of route messages' charts; a query string no page can use is a 400 first; a request
line or header fields over the limits are a 414 or 431 before anything else."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

# The signed links in alert emails work without a login: their token is the authority.
OPEN_PREFIXES = (
    "/accounts/login/",
    "/oidc/",
    "/static/",
    "/healthz",
    "/favicon.ico",
    "/api/",
    "/admin/",
    "/notifications/unsubscribe/",
    "/notifications/triage/",
    # An alert's chart in a Slack or Teams message, fetched by the chat service (signed link).
    "/notifications/charts/",
)


class SignedInRequest(HttpRequest):
    """A request to a page behind ``LoginRequiredMiddleware``: its ``user`` is a signed-in user.

    A type for views' ``request`` parameter, never instantiated: a view outside ``OPEN_PREFIXES``
    declares it, and mypy then reads ``request.user`` as a ``User``, not a possible anonymous one.
    """

    user: User


# The request limits (gunicorn's defaults). gunicorn's own are set a little above them
# (``gunicorn_conf``): gunicorn answers past its limits with an HTML page, which an API client
# cannot read; this middleware answers the same 414 and 431 in the API's JSON error shape.
MAX_REQUEST_LINE = 4094  # bytes of "GET /path?query HTTP/1.1": REQUEST_LINE_LIMIT by default
MAX_HEADER_FIELD = 8190  # bytes of one "Name: value" line, its CRLF included
MAX_HEADER_FIELDS = 100
# WSGI names of header fields that lack the HTTP_ prefix.
_UNPREFIXED = {"CONTENT_TYPE": "Content-Type", "CONTENT_LENGTH": "Content-Length"}


def _limit_response(request: HttpRequest, *, status: int, code: str, message: str) -> HttpResponse:
    """The API's error shape (``api/errors.py``) on its paths, plain text elsewhere."""
    if request.path.startswith("/api/"):
        body = json.dumps({"error": {"code": code, "message": message, "path": ""}})
        return HttpResponse(body, status=status, content_type="application/json")
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


class RequestLimits:
    """414 for a request line longer than ``MAX_REQUEST_LINE`` bytes, 431 for more than
    ``MAX_HEADER_FIELDS`` header fields or one longer than ``MAX_HEADER_FIELD`` bytes (docs/api.md,
    "Errors"). First in the chain: nothing reads the request before it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.max_line = settings.REQUEST_LINE_LIMIT  # 0: no limit

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        uri = meta.get("RAW_URI") or (
            meta.get("PATH_INFO", "") + ("?" + meta["QUERY_STRING"] if meta.get("QUERY_STRING") else "")
        )
        line = len(meta.get("REQUEST_METHOD", "")) + 1 + len(uri.encode("latin-1", "replace")) + 1
        line += len(meta.get("SERVER_PROTOCOL", "HTTP/1.1"))
        if self.max_line and line > self.max_line:
            return _limit_response(
                request,
                status=414,
                code="uri_too_long",
                message=f"the request line is {line:,} bytes; at most {self.max_line:,} "
                "(send long filters in a body, or fewer of them)",
            )
        fields = 0
        for key, value in meta.items():
            if key.startswith("HTTP_"):
                name = key[5:].replace("_", "-").title()
            elif key in _UNPREFIXED:
                name = _UNPREFIXED[key]
            else:
                continue
            fields += 1
            size = len(name) + 2 + len(str(value).encode("latin-1", "replace")) + 2
            if size > MAX_HEADER_FIELD:
                return _limit_response(
                    request,
                    status=431,
                    code="header_too_large",
                    message=f"the header field {name} is {size:,} bytes; at most {MAX_HEADER_FIELD:,}",
                )
        if fields > MAX_HEADER_FIELDS:
            return _limit_response(
                request,
                status=431,
                code="too_many_headers",
                message=f"{fields} header fields; at most {MAX_HEADER_FIELDS}",
            )
        return self.get_response(request)


class LoginRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.user.is_authenticated and not request.path.startswith(OPEN_PREFIXES):
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)


class QueryStringGuard:
    """A NUL character in a query parameter (``?model=%00``) is a 400 naming the parameter.

    PostgreSQL text cannot hold NUL, so such a value reaching a filter was a 500 (``DataError``);
    no page has a use for one. The API checks its parameters in its own schemas (a 422 in its
    error shape), so its paths are left to it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        query = request.META.get("QUERY_STRING", "")
        if ("%00" in query or "\x00" in query) and not request.path.startswith("/api/"):
            for name, values in request.GET.lists():
                if "\x00" in name or any("\x00" in value for value in values):
                    shown = name.replace("\x00", "\\0")
                    return HttpResponseBadRequest(
                        f"query parameter {shown!r} contains a NUL character", content_type="text/plain"
                    )
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """The ``Content-Security-Policy`` header of ``settings.CONTENT_SECURITY_POLICY`` on every
    response that has none (works the same on Django 5.2, which has no CSP support of its own)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response
