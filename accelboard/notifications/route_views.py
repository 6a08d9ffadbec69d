"""The alert routes page (list, add, remove, send a test) and the signed chart images that
route messages link to.

1. A team's routes are managed by its leads (and staff); any member may add a personal route
   for a team they belong to. Another member's route, or a team route one does not lead, is a
   404 (its existence is not disclosed).
2. The chart link works without a login (Slack and Teams fetch it): its signed token names the
   alert; a changed or expired token is a 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accelboard.core.middleware import SignedInRequest

from . import emails, links, route_services, selectors
from .forms import RouteAddForm
from .models import AlertRoute


def _page(request: SignedInRequest, *, form: RouteAddForm, status: int = 200) -> HttpResponse:
    routes = selectors.route_list_for_user(user=request.user)
    context: dict[str, Any] = {
        "form": form,
        "has_teams": selectors.subscribable_teams(user=request.user).exists(),
        "routes": routes,
        "deliveries": selectors.route_delivery_log(route_ids=[r.pk for r in routes]),
    }
    return render(request, "notifications/routes.html", context, status=status)


@require_http_methods(["GET", "POST"])
def routes(request: SignedInRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, form=RouteAddForm(user=request.user))
    form = RouteAddForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    data = form.cleaned_data
    try:
        route, signing_secret = route_services.route_create(
            user=request.user,
            team=data["team"],
            name=data["name"],
            channel=data["channel"],
            kind=data["kind"],
            min_severity=data["min_severity"],
            url=data["url"],
            routing_key=data["routing_key"],
            personal=data["personal"],
        )
    except ValidationError as exc:
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return _page(request, form=form, status=400)
    done = f"Route “{route.name}” added: {route.get_channel_display()}."
    if signing_secret:
        done += f" Its signing secret (shown once; verify each request with it): {signing_secret}"
    messages.success(request, done)
    return redirect("notifications:routes")


def _managed(request: SignedInRequest, route_id: int) -> AlertRoute:
    try:
        route = selectors.route_get(route_id=route_id)
    except AlertRoute.DoesNotExist:
        raise Http404("No such route") from None
    if not route_services.route_can_manage(user=request.user, route=route):
        raise Http404("No such route")
    return route


@require_POST
def route_remove(request: SignedInRequest, route_id: int) -> HttpResponse:
    route = _managed(request, route_id)
    try:
        route_services.route_delete(user=request.user, route=route)
    except PermissionDenied:
        raise Http404("No such route") from None
    messages.success(request, f"Route “{route.name}” removed.")
    return redirect("notifications:routes")


@require_POST
def route_test(request: SignedInRequest, route_id: int) -> HttpResponse:
    """ "Send a test": now, with the channel's answer shown and kept in the delivery log."""
    route = _managed(request, route_id)
    delivery = route_services.route_test_send(user=request.user, route=route)
    if delivery.status == "sent":
        messages.success(request, f"Test sent to “{route.name}”: HTTP {delivery.response_status}.")
    else:
        messages.error(request, f"The test to “{route.name}” failed: {delivery.last_error}")
    return redirect("notifications:routes")


@require_GET
def route_chart(request: HttpRequest, token: str) -> HttpResponse:
    try:
        alert_id = links.chart_token_read(token)
    except signing.BadSignature:
        raise Http404("No such chart") from None
    alert = selectors.alert_for_chart(alert_id=alert_id)
    if alert is None:
        raise Http404("No such chart")
    drawn = emails.alert_chart_png(alert)
    if drawn is None:
        raise Http404("This alert has no chart")
    response = HttpResponse(drawn, content_type="image/png")
    response["Cache-Control"] = "public, max-age=3600"
    return response
