"""Login is required everywhere except the login page (and single sign-on's way back), static files, health, the token API and
the signed links of alert emails (unsubscribe, acknowledge, dismiss); a query string no page can
use is a 400 first."""

from __future__ import annotations

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
)


class SignedInRequest(HttpRequest):
    """A request to a page behind ``LoginRequiredMiddleware``: its ``user`` is a signed-in user.

    A type for views' ``request`` parameter, never instantiated: a view outside ``OPEN_PREFIXES``
    declares it, and mypy then reads ``request.user`` as a ``User``, not a possible anonymous one.
    """

    user: User


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
