"""Subscription page and the one-click unsubscribe link.

Thin: parse with a form, call one service, redirect (or render with a 400 naming the field).
Another user's subscription is a 404. The unsubscribe link works without a login (its signed
token is the authority) and without a CSRF token, because mail clients post it (RFC 8058); a GET
only shows a confirmation button, so that link scanners that fetch every URL do not unsubscribe.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core import signing
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from accelboard.alerts.choices import AlertKind

from . import selectors, services
from .choices import DeliveryMode
from .forms import SubscriptionAddForm, SubscriptionModeForm
from .models import Subscription


def _page(request: HttpRequest, *, form: SubscriptionAddForm, status: int = 200) -> HttpResponse:
    subs = list(selectors.subscription_list_for_user(user=request.user))
    teams = list(selectors.subscribable_teams(user=request.user))
    subscribed_team_ids = {s.team_id for s in subs if not s.series_id and not s.kind}
    context: dict[str, Any] = {
        "form": form,
        "subscriptions": subs,
        "teams": teams,
        "teams_unsubscribed": [t for t in teams if t.pk not in subscribed_team_ids],
        "modes": DeliveryMode.choices,
        "kind_labels": dict(AlertKind.choices),
        "deliveries": selectors.delivery_list_for_user(user=request.user, limit=10),
        "has_email": bool(request.user.email),
    }
    return render(request, "notifications/subscriptions.html", context, status=status)


@require_http_methods(["GET", "POST"])
def subscriptions(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, form=SubscriptionAddForm(user=request.user))
    form = SubscriptionAddForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    try:
        sub = services.subscription_create(
            user=request.user,
            team=form.cleaned_data["team"],
            series=form.cleaned_data["series"],
            kind=form.cleaned_data["kind"],
            mode=form.cleaned_data["mode"],
        )
    except ValidationError as exc:
        for field, errors in exc.error_dict.items():
            form.add_error(None if field == "__all__" else field, errors)
        return _page(request, form=form, status=400)
    messages.success(request, f"Subscribed: {sub.scope_label()} ({sub.get_mode_display().lower()}).")
    return redirect("notifications:subscriptions")


@require_POST
def subscriptions_my_teams(request: HttpRequest) -> HttpResponse:
    created = services.subscriptions_for_my_teams(user=request.user)
    if created:
        messages.success(request, f"Subscribed to all alerts of {created} team{'s' if created != 1 else ''}.")
    else:
        messages.info(request, "You already follow all alerts of every team you belong to.")
    return redirect("notifications:subscriptions")


def _own(request: HttpRequest, subscription_id: int) -> Subscription:
    try:
        return selectors.subscription_get_for_user(user=request.user, subscription_id=subscription_id)
    except Subscription.DoesNotExist as exc:
        raise Http404("No such subscription of yours") from exc


@require_POST
def subscription_mode(request: HttpRequest, subscription_id: int) -> HttpResponse:
    sub = _own(request, subscription_id)
    form = SubscriptionModeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"mode: {' '.join(form.errors['mode'])}")
        return _page(request, form=SubscriptionAddForm(user=request.user), status=400)
    services.subscription_mode_set(subscription=sub, mode=form.cleaned_data["mode"])
    messages.success(request, f"{sub.scope_label()}: now {sub.get_mode_display().lower()}.")
    return redirect("notifications:subscriptions")


@require_POST
def subscription_remove(request: HttpRequest, subscription_id: int) -> HttpResponse:
    sub = _own(request, subscription_id)
    label = sub.scope_label()
    services.subscription_delete(subscription=sub)
    messages.success(request, f"Unsubscribed: {label}.")
    return redirect("notifications:subscriptions")


@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        from .emails import unsubscribe_token_read

        payload = unsubscribe_token_read(token)
    except signing.BadSignature:
        return render(request, "notifications/unsubscribe.html", {"invalid": True}, status=400)
    if request.method == "GET":
        sub = None
        if "s" in payload:
            sub = (
                Subscription.objects.select_related("team")
                .filter(pk=payload["s"], user_id=payload["u"])
                .first()
            )
        context = {
            "confirm": True,
            "subscription": sub,
            "digest": "s" not in payload,
            "gone": "s" in payload and sub is None,
        }
        return render(request, "notifications/unsubscribe.html", context)
    _, removed = services.subscription_unsubscribe(token=token)
    return render(request, "notifications/unsubscribe.html", {"done": True, "removed": removed})
