"""Login is required everywhere except the login page, static files, health, the token API and
the signed unsubscribe links of alert emails."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse

# The unsubscribe link in alert emails works without a login: its signed token is the authority.
OPEN_PREFIXES = (
    "/accounts/login/",
    "/static/",
    "/healthz",
    "/api/",
    "/admin/",
    "/notifications/unsubscribe/",
)


class LoginRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.user.is_authenticated and not request.path.startswith(OPEN_PREFIXES):
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)
