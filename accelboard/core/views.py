"""The liveness probe and the login page: the core app's pages (the team pages are in ``dashboard``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import LoginView
from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static

from .access import Action, request_scope
from .oidc import sign_in_offer
from .pipeline_selectors import pipeline_status


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and docker-compose healthchecks.

    ``?detail=1`` adds the background pipeline: ``"pipeline": "ok"`` or ``"lagging"`` for anyone
    (a monitor alerts on it; the answer stays 200, since a lagging queue is no reason to take the
    web server out of a load balancer), and each check's figures for staff (``accelboard status``).
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any database failure means "unhealthy"
        return JsonResponse({"status": "error", "database": str(exc)[:200]}, status=503)
    body: dict[str, object] = {"status": "ok"}
    if request.GET.get("detail"):
        status = pipeline_status().as_dict()
        body["pipeline"] = status["status"]
        if request_scope(request).can_everywhere(Action.MANAGE):
            body["checks"] = status["checks"]
    return JsonResponse(body)


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """``/favicon.ico``, which browsers ask for on pages without an icon link (the API's JSON, the
    error pages): the site's icon in ``static/``, never a 404 in the console."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


class LoginPage(LoginView):
    """Django's login form, and a "Sign in with <provider>" button when single sign-on is on."""

    template_name = "core/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_provider"] = sign_in_offer()
        return context
