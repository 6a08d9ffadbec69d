"""One error shape for the whole API: ``{"error": {"code", "message", "path"}}``.

Ninja's default handlers answer ``{"detail": ...}`` in several shapes; clients (and the agent)
parse one. ``path`` names the field as ``metrics[2].unit``; empty when the whole body is at fault.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pydantic
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.signals import got_request_exception
from django.http import Http404, HttpRequest, HttpResponse
from django.views import defaults
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from accelboard.fleet.ingest_validation import IngestRejected

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)
logger = logging.getLogger("django.request")
SERVER_ERROR = "the server failed on this request; it was logged, and retrying later may succeed"
_LOCATIONS = {"body", "query", "path", "header", "cookie", "form", "file"}
_MESSAGES = {"missing": "is required", "extra_forbidden": "unknown field"}


def error_response(
    api: NinjaAPI, request: HttpRequest, *, status: int, code: str, message: str, path: str = ""
) -> HttpResponse:
    return api.create_response(
        request, {"error": {"code": code, "message": message, "path": path}}, status=status
    )


def loc_path(loc: Sequence[Any]) -> str:
    """("query", "since") -> "since"; ("body", "payload", "metrics", 2) -> "metrics[2]"."""
    parts = list(loc)
    if parts and parts[0] in _LOCATIONS:
        # A body schema parameter is wrapped under its parameter name by ninja; drop it too.
        parts = parts[2:] if parts[0] == "body" else parts[1:]
    return path_from_loc(parts)


def path_from_loc(parts: Sequence[Any]) -> str:
    """("metrics", 2, "unit") -> "metrics[2].unit"."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def validated(model: type[ModelT], data: Any) -> ModelT:
    """``data`` as ``model``, or ``IngestRejected`` (422) naming the first bad field."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        kind = str(first["type"])
        message = _MESSAGES.get(kind) or str(first["msg"])
        raise IngestRejected(message, path=path_from_loc(first["loc"]), code=kind) from None


def install(api: NinjaAPI) -> None:
    def rejected(request: HttpRequest, exc: IngestRejected) -> HttpResponse:
        return error_response(
            api, request, status=exc.status, code=exc.code, message=exc.message, path=exc.path
        )

    def validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        first = exc.errors[0] if exc.errors else {}
        kind = str(first.get("type", "invalid"))
        message = _MESSAGES.get(kind) or str(first.get("msg", "invalid value"))
        return error_response(
            api, request, status=422, code=kind, message=message, path=loc_path(first.get("loc", ()))
        )

    def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return error_response(
            api,
            request,
            status=401,
            code="unauthenticated",
            message="a valid API token is required: Authorization: Bearer <token>",
        )

    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        return error_response(api, request, status=exc.status_code, code="http_error", message=str(exc))

    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return error_response(api, request, status=404, code="not_found", message=str(exc) or "not found")

    def unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        # Ninja answers an exception it has no handler for by re-raising it, and Django then
        # renders its HTML 500 page: an API client gets the API's shape instead, and the error
        # goes where Django's would (the django.request log, error trackers' signal).
        if settings.DEBUG:
            raise exc
        logger.error("Internal Server Error: %s", request.path, exc_info=exc, extra={"request": request})
        got_request_exception.send(sender=None, request=request)
        return error_response(api, request, status=500, code="server_error", message=SERVER_ERROR)

    # Through ``exception_handler`` (which registers with ``add_exception_handler``): the latter's
    # annotation wants a handler that also accepts the exception's class, which ninja never passes.
    api.exception_handler(Exception)(unexpected)
    api.exception_handler(IngestRejected)(rejected)
    api.exception_handler(ValidationError)(validation)
    api.exception_handler(AuthenticationError)(unauthenticated)
    api.exception_handler(HttpError)(http_error)
    api.exception_handler(Http404)(not_found)


# Errors Django answers before or outside the API (a URL the API does not have, a middleware
# failure): the API's paths still get the API's JSON shape; every other path Django's own page.


def _api_path(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _plain_error(*, status: int, code: str, message: str) -> HttpResponse:
    body = json.dumps({"error": {"code": code, "message": message, "path": ""}})
    return HttpResponse(body, status=status, content_type="application/json")


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: JSON for the API, the site's 500 page for the rest."""
    if _api_path(request):
        return _plain_error(status=500, code="server_error", message=SERVER_ERROR)
    return defaults.server_error(request)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: JSON for the API, the site's 404 page for the rest."""
    if _api_path(request):
        return _plain_error(status=404, code="not_found", message=f"no endpoint {request.path}")
    return defaults.page_not_found(request, exception)


def docs_login_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The OpenAPI schema and the docs page for signed-in users only (``API_DOCS_PUBLIC=0``): the
    schema answers 401 in the API's shape, the docs page sends the browser to the login page."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if request.path.endswith(".json"):
            return _plain_error(status=401, code="unauthenticated", message="sign in to read the API schema")
        return redirect_to_login(request.get_full_path())

    return wrapped
