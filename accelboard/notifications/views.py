"""Subscription page, the links of alert emails (unsubscribe, acknowledge, dismiss), the outbox.

Thin: parse with a form, call one service or selector, redirect (or render with a 4xx naming the
field). Another user's subscription is a 404.

1. The unsubscribe and triage links work without a login (their signed token is the authority)
   and without a CSRF token (mail clients post the unsubscribe link, RFC 8058). A GET only shows
   a confirmation button, so that link scanners that fetch every URL change nothing.
2. "Send me a test email" sends at once and shows the mail server's answer.
3. The outbox (staff only, ``core.access`` rule 5; others get a 403) lists the emails the outbox mail backend kept and
   shows each as a mail client would, its HTML in a sandboxed frame that runs no script and
   loads nothing but its own inline images.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accelboard.alerts.choices import AlertKind
from accelboard.core.access import Action, request_scope
from accelboard.core.middleware import SignedInRequest

from . import links, selectors, services
from .backends import OUTBOX_BACKEND
from .choices import DeliveryMode, TriageAction
from .emails import mail_settings_summary
from .forms import SubscriptionAddForm, SubscriptionModeForm, TriageDismissForm
from .models import OutboxMessage, Subscription
from .outbox import email_render


def _page(request: SignedInRequest, *, form: SubscriptionAddForm, status: int = 200) -> HttpResponse:
    subs = list(selectors.subscription_list_for_user(user=request.user))
    teams, member_ids = selectors.subscription_teams(user=request.user)
    subscribed_team_ids = {s.team_id for s in subs if not s.series_id and not s.kind}
    context: dict[str, Any] = {
        "form": form,
        "subscriptions": subs,
        "teams": teams,
        "teams_unsubscribed": [t for t in teams if t.pk in member_ids and t.pk not in subscribed_team_ids],
        "modes": DeliveryMode.choices,
        "kind_labels": dict(AlertKind.choices),
        "deliveries": selectors.delivery_list_for_user(user=request.user, limit=10),
        "has_email": bool(request.user.email),
        "outbox_count": selectors.outbox_count() if _reads_outbox(request) else None,
    }
    return render(request, "notifications/subscriptions.html", context, status=status)


@require_http_methods(["GET", "POST"])
def subscriptions(request: SignedInRequest) -> HttpResponse:
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
def subscription_mode(request: SignedInRequest, subscription_id: int) -> HttpResponse:
    sub = _own(request, subscription_id)
    form = SubscriptionModeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"mode: {' '.join(str(error) for error in form.errors['mode'])}")
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
        payload = links.unsubscribe_token_read(token)
    except signing.BadSignature:
        return render(request, "notifications/unsubscribe.html", {"invalid": True}, status=400)
    if request.method == "GET":
        sub = None
        if "s" in payload:
            sub = selectors.subscription_find(subscription_id=payload["s"], user_id=payload["u"])
        context = {
            "confirm": True,
            "subscription": sub,
            "digest": "s" not in payload,
            "gone": "s" in payload and sub is None,
        }
        return render(request, "notifications/unsubscribe.html", context)
    _, removed = services.subscription_unsubscribe(token=token)
    return render(request, "notifications/unsubscribe.html", {"done": True, "removed": removed})


@require_POST
def test_email(request: SignedInRequest) -> HttpResponse:
    """ "Send me a test email": to the user's own address, now, with the server's answer shown."""
    if not request.user.email:
        messages.error(request, "Your account has no email address to send a test email to.")
        return redirect("notifications:subscriptions")
    try:
        done = services.email_test_send(to=request.user.email, requested_by=request.user.get_username())
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    except OSError as exc:
        messages.error(request, f"The test email was not sent: {type(exc).__name__}: {exc}")
    else:
        messages.success(request, done)
    return redirect("notifications:subscriptions")


# --- triage links -----------------------------------------------------------------------------


@csrf_exempt
@require_http_methods(["GET", "POST"])
def triage(request: HttpRequest, token: str) -> HttpResponse:
    """An email's acknowledge or dismiss link: GET shows what would happen, the button acts.
    A signed-in user who may not see the alert gets the page of an alert that does not exist."""
    viewer = request.user if request.user.is_authenticated else None
    try:
        prompt = services.triage_link_read(token=token, viewer=viewer)
    except services.TriageLinkError as exc:
        return render(request, "notifications/triage.html", {"error": str(exc)}, status=exc.status)
    dismiss = prompt.claim.action == TriageAction.DISMISS
    form = TriageDismissForm(request.POST or None) if dismiss else None
    context = {"prompt": prompt, "alert": prompt.alert, "dismiss": dismiss, "form": form}
    if request.method == "GET":
        return render(request, "notifications/triage.html", context)
    if form is not None and not form.is_valid():
        context["error"] = "; ".join(f"{field}: {errs[0]}" for field, errs in form.errors.items())
        return render(request, "notifications/triage.html", context, status=400)
    data = form.cleaned_data if form is not None else {}
    try:
        alert = services.triage_link_use(
            token=token, reason=data.get("reason", ""), note=data.get("note", ""), viewer=viewer
        )
    except services.TriageLinkError as exc:
        context["error"] = str(exc)
        return render(request, "notifications/triage.html", context, status=exc.status)
    context.update(done=True, alert=alert, alert_url=links.alert_path(alert.pk))
    return render(request, "notifications/triage.html", context)


# --- outbox (staff) ---------------------------------------------------------------------------


def _reads_outbox(request: HttpRequest) -> bool:
    """The outbox holds every user's email: for those who manage every team (staff)."""
    return request_scope(request).can_everywhere(Action.MANAGE)


def _staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _reads_outbox(request):
            raise PermissionDenied("The outbox is for staff: it holds every user's email.")
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


def _message(message_id: int) -> OutboxMessage:
    try:
        return selectors.outbox_get(message_id=message_id)
    except OutboxMessage.DoesNotExist as exc:
        raise Http404("No such email in the outbox") from exc


@require_GET
@_staff_only
def outbox(request: HttpRequest) -> HttpResponse:
    rows = selectors.outbox_list()
    backend, _ = mail_settings_summary()
    context = {"rows": rows, "outbox_active": backend == OUTBOX_BACKEND, "backend": backend}
    return render(request, "notifications/outbox.html", context)


@require_GET
@_staff_only
def outbox_message(request: HttpRequest, message_id: int) -> HttpResponse:
    message = _message(message_id)
    rendered = email_render(bytes(message.raw))
    return render(request, "notifications/outbox_message.html", {"message": message, "email": rendered})


@require_GET
@_staff_only
@xframe_options_sameorigin
def outbox_message_html(request: HttpRequest, message_id: int) -> HttpResponse:
    """The HTML part alone, for the message page's sandboxed frame."""
    rendered = email_render(bytes(_message(message_id).raw))
    response = HttpResponse(rendered.html or "<p>This email has no HTML part.</p>", content_type="text/html")
    # Inline images are data: URLs; nothing else may load or run, whatever the email contains.
    response["Content-Security-Policy"] = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox allow-popups "
        "allow-popups-to-escape-sandbox allow-top-navigation-by-user-activation"
    )
    return response


@require_POST
@_staff_only
def outbox_clear(request: HttpRequest) -> HttpResponse:
    deleted = services.outbox_clear()
    messages.success(request, f"Deleted {deleted} email{'s' if deleted != 1 else ''} from the outbox.")
    return redirect("notifications:outbox")
