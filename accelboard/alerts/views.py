"""Alert pages: the list (filters, counts by state, false-positive rates, bulk and per-row
triage), one alert's page (series chart, evidence, run/commit range, history, triage forms), and
the triage POSTs.

Thin: each view decides the teams the user may see, parses input with a form, calls page
selectors (reads) or the alert services (writes), and renders. Who may do what:

1. Anyone who may see the alert's team (members, finance included; staff) may view it; an alert
   of another team is a 404, so ids reveal nothing.
2. Leads and engineers of the alert's team, and staff, may triage. Finance may look but not
   triage (403 with a reason).
3. A transition the state machine refuses (dismissing a resolved alert, acknowledging twice) is
   a 409 with the reason on the page; a bad form value a 400 naming the field; never a 500. A
   bulk action is all-or-nothing: one refused alert rolls the others back.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from accelboard.benchmarks.metrics import metric_label
from accelboard.core.choices import Role
from accelboard.core.models import Team
from accelboard.core.selectors import roles_for_user, team_ids_visible

from . import charts, page_selectors
from .choices import AlertKind, AlertState
from .detection import segment
from .forms import AcknowledgeForm, AlertFilterForm, BulkTriageForm, DismissForm, ExpectedForm, NoteForm
from .models import Alert
from .selectors import alert_feedback_stats, min_effect_for_series
from .services import (
    AlertTransitionError,
    alert_acknowledge,
    alert_dismiss,
    alert_mark_expected,
    alert_resolve,
)

ALERTS_PER_PAGE = 50
TRIAGE_ROLES = {Role.TEAM_LEAD, Role.ENGINEER}
ACTIONS = ("acknowledge", "resolve", "dismiss", "expected")
# Units of the observed/reference figures production rules store (production.py's Finding.value).
PRODUCTION_UNITS = {AlertKind.SLO: "ms", AlertKind.THROUGHPUT: "tokens/s", AlertKind.ENERGY: "J/token"}


def _team_scope(request: HttpRequest) -> list[int] | None:
    """None means every team (staff); otherwise the ids of the user's teams."""
    if request.user.is_staff:
        return None
    return team_ids_visible(user=request.user)


def _triage_team_ids(request: HttpRequest) -> set[int] | None:
    """Teams whose alerts the user may triage; None means all (staff)."""
    if request.user.is_staff:
        return None
    return {team_id for team_id, role in roles_for_user(user=request.user).items() if role in TRIAGE_ROLES}


def _can_triage(request: HttpRequest, alert: Alert, triage_ids: set[int] | None | bool = False) -> bool:
    """``triage_ids``: the caller's ``_triage_team_ids`` when it has them (a list page asks once)."""
    ids = _triage_team_ids(request) if triage_ids is False else triage_ids
    return ids is None or alert.team_id in ids  # type: ignore[operator]


def _visible_alert(request: HttpRequest, pk: int) -> Alert:
    try:
        return page_selectors.alert_get_visible(alert_id=pk, team_ids=_team_scope(request))
    except Alert.DoesNotExist as exc:
        raise Http404("No such alert in your teams") from exc


# --- list ---------------------------------------------------------------------------------------


def _list_context(
    request: HttpRequest, *, bulk_form: BulkTriageForm | None = None
) -> tuple[dict[str, Any], int]:
    team_ids = _team_scope(request)
    params = request.GET
    if request.method == "POST":
        # A refused bulk action shows the list it was posted from, with that list's filters.
        params = QueryDict(urlsplit(_next_url(request, "")).query)
    form = AlertFilterForm(params or None, choices=page_selectors.alert_filter_choices(team_ids=team_ids))
    status = 200
    if params and not form.is_valid():
        filters, status = None, 400
    else:
        filters = form.filters() if params else page_selectors.AlertFilters()
    context: dict[str, Any] = {
        "form": form,
        "page": None,
        "filtered": True,
        "bulk_form": bulk_form or BulkTriageForm(),
        "no_team": team_ids == [],
    }
    triage_ids = _triage_team_ids(request)
    if filters is not None:
        alerts = page_selectors.alert_list_filtered(team_ids=team_ids, filters=filters)
        page = Paginator(alerts, ALERTS_PER_PAGE).get_page(params.get("page"))
        query = params.copy()
        query.pop("page", None)
        state_query = params.copy()
        for key in ("page", "state"):
            state_query.pop(key, None)
        counts = page_selectors.alert_state_counts(team_ids=team_ids, filters=filters)
        context.update(
            page=page,
            rows=[
                {
                    "alert": a,
                    "can_triage": _can_triage(request, a, triage_ids),
                    "confidence": _confidence(a.confidence),
                }
                for a in page.object_list
            ],
            filtered=filters != page_selectors.AlertFilters(),
            query=query.urlencode(),
            state_query=state_query.urlencode(),
            state=filters.state,
            counts=[(value, label, counts[value]) for value, label in AlertState.choices],
            total=sum(counts.values()),
        )
    context["any_triage"] = triage_ids is None or bool(triage_ids)
    context["feedback"] = alert_feedback_stats(
        team_ids=team_ids if team_ids is not None else Team.objects.values_list("pk", flat=True)
    )
    # Where triage returns to: this list with its filters (on a refused bulk POST, the list the
    # form came from, not the POST's own URL).
    list_url = reverse("alerts:list")
    context["next"] = _next_url(request, list_url) if request.method == "POST" else request.get_full_path()
    # After a refused bulk action the same boxes stay ticked, so fixing the reason is one click.
    posted = request.POST.getlist("ids") if request.method == "POST" else []
    context["checked"] = {int(v) for v in posted if v.isdigit()}
    return context, status


@require_GET
def alert_list(request: HttpRequest) -> HttpResponse:
    context, status = _list_context(request)
    return render(request, "alerts/list.html", context, status=status)


@require_POST
def alert_bulk_triage(request: HttpRequest) -> HttpResponse:
    """Acknowledge, or dismiss with a reason, the ticked alerts, all or none."""
    form = BulkTriageForm(request.POST)
    if not form.is_valid():
        context, _ = _list_context(request, bulk_form=form)
        context["error"] = "; ".join(f"{field}: {errs[0]}" for field, errs in form.errors.items())
        return render(request, "alerts/list.html", context, status=400)
    ids = form.cleaned_data["ids"]
    team_ids = _team_scope(request)
    alerts = list(
        page_selectors.alert_list_filtered(team_ids=team_ids, filters=page_selectors.AlertFilters()).filter(
            pk__in=ids
        )
    )
    missing = sorted(set(ids) - {a.pk for a in alerts})
    if missing:
        raise Http404(f"No such alert in your teams: {', '.join(map(str, missing))}")
    triage_ids = _triage_team_ids(request)
    refused = [a for a in alerts if not _can_triage(request, a, triage_ids)]
    if refused:
        return _forbidden(request, refused[0])
    action, reason = form.cleaned_data["action"], form.cleaned_data.get("reason") or ""
    try:
        with transaction.atomic():
            for alert in alerts:
                try:
                    if action == "acknowledge":
                        alert_acknowledge(alert=alert, user=request.user)
                    else:
                        alert_dismiss(alert=alert, user=request.user, reason=reason)
                except AlertTransitionError as exc:
                    raise AlertTransitionError(f"alert {alert.pk} ({alert.title}): {exc}") from exc
    except AlertTransitionError as exc:
        context, _ = _list_context(request, bulk_form=form)
        context["error"] = f"Nothing was changed. {exc}"
        return render(request, "alerts/list.html", context, status=409)
    verb = "acknowledged" if action == "acknowledge" else "dismissed"
    messages.success(request, f"{len(alerts)} alert{'s' if len(alerts) != 1 else ''} {verb}.")
    return HttpResponseRedirect(_next_url(request, reverse("alerts:list")))


# --- detail -------------------------------------------------------------------------------------


def _chart(alert: Alert, marks: list[Any]) -> tuple[dict[str, Any] | None, int]:
    """The series figure and how many points it shows (None without a series or points)."""
    series = alert.series
    if series is None:
        return None, 0
    points = page_selectors.alert_series_points(alert=alert)
    if len(points) < 2:
        return None, len(points)
    change_at = alert.first_run.started_at if alert.first_run else None
    min_effect = min_effect_for_series(series=series)
    found = [
        points[cp.index]["measured_at"]
        for cp in segment([p["value"] for p in points], direction=series.direction, min_effect=min_effect)
    ]
    history = [moment for moment in found if moment != change_at]
    before_from = max((m for m in history if change_at and m < change_at), default=None)
    figure = charts.alert_series_figure(
        points=points,
        label=metric_label(series.metric),
        unit=series.unit,
        direction=series.direction,
        change_at=change_at,
        before=(alert.before_mean, alert.before_spread) if alert.before_mean is not None else None,
        after=(alert.after_mean, alert.after_spread) if alert.after_mean is not None else None,
        before_from=before_from,
        history_changes=history,
        expected=[{"at": m.run.started_at, "text": m.note or m.get_scope_display()} for m in marks],
        run_ids=[r for r in (alert.last_good_run_id, alert.first_run_id) if r],
    )
    return figure, len(points)


def _detail_context(
    request: HttpRequest, alert: Alert, *, forms: dict[str, Any] | None = None, error: str = ""
) -> dict[str, Any]:
    marks = page_selectors.alert_expected_marks(alert=alert)
    figure, point_count = _chart(alert, marks)
    forms = forms or {}
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    return {
        "alert": alert,
        "series": alert.series,
        "metric_label": metric_label(alert.series.metric) if alert.series else "",
        "figure": figure,
        "point_count": point_count,
        "runs": page_selectors.alert_run_range(alert=alert),
        "events": page_selectors.alert_events(alert=alert),
        "marks": marks,
        "evidence": _evidence(detail),
        "unit": alert.series.unit
        if alert.series
        else str(detail.get("unit") or PRODUCTION_UNITS.get(alert.kind, "")),
        "reason": str(detail.get("reason", "")),
        "limit": detail.get("threshold") if isinstance(detail.get("threshold"), int | float) else None,
        "confidence": _confidence(alert.confidence),
        "min_effect_pct": f"{alert.min_effect * 100:.3g}%" if alert.min_effect is not None else "",
        "compare_url": (
            f"{reverse('benchmarks:compare')}?a={alert.last_good_run_id}&b={alert.first_run_id}"
            if alert.last_good_run_id and alert.first_run_id
            else ""
        ),
        "can_triage": _can_triage(request, alert),
        "is_open": alert.state in (AlertState.OPEN, AlertState.ACKNOWLEDGED),
        "ack_form": forms.get("acknowledge") or AcknowledgeForm(prefix="ack"),
        "resolve_form": forms.get("resolve") or NoteForm(prefix="resolve"),
        "dismiss_form": forms.get("dismiss") or DismissForm(prefix="dismiss"),
        "expected_form": forms.get("expected") or ExpectedForm(prefix="expected"),
        "error": error,
    }


def _confidence(value: float | None) -> str:
    """1 - p as a percentage that never rounds a near-certainty up to a false "100%"."""
    if value is None:
        return ""
    if value >= 0.9995:
        return "> 99.9%"
    return f"{value * 100:.1f}%"


def _evidence(detail: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The detector's detail JSON as (key, text, is_block) rows: scalars inline, structures as
    indented JSON, so a production alert's evidence (window, samples, limits) reads as written."""
    rows = []
    for key in sorted(detail, key=str):
        value = detail[key]
        if isinstance(value, dict | list):
            rows.append((str(key), json.dumps(value, indent=2, sort_keys=True, default=str), True))
        else:
            rows.append((str(key), "—" if value is None else str(value), False))
    return rows


@require_GET
def alert_detail(request: HttpRequest, pk: int) -> HttpResponse:
    alert = _visible_alert(request, pk)
    return render(request, "alerts/detail.html", _detail_context(request, alert))


# --- triage -------------------------------------------------------------------------------------


def _forbidden(request: HttpRequest, alert: Alert) -> HttpResponse:
    return render(
        request,
        "alerts/forbidden.html",
        {"alert": alert, "reason": "Only the leads and engineers of the alert's team can triage it."},
        status=403,
    )


def _next_url(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


_FORMS = {
    "acknowledge": (AcknowledgeForm, "ack"),
    "resolve": (NoteForm, "resolve"),
    "dismiss": (DismissForm, "dismiss"),
    "expected": (ExpectedForm, "expected"),
}
_DONE = {
    "acknowledge": "Acknowledged.",
    "resolve": "Resolved.",
    "dismiss": "Dismissed.",
    "expected": "Marked as expected: the series' baseline starts again at the first bad run.",
}


@require_POST
def alert_triage(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404(f"No triage action {action!r}; one of {', '.join(ACTIONS)}")
    alert = _visible_alert(request, pk)
    if not _can_triage(request, alert):
        return _forbidden(request, alert)
    form_class, prefix = _FORMS[action]
    # The list page's row buttons post bare field names; the detail page's forms are prefixed.
    form = form_class(
        request.POST, prefix=prefix if any(k.startswith(prefix + "-") for k in request.POST) else None
    )
    if not form.is_valid():
        errors = "; ".join(f"{field}: {errs[0]}" for field, errs in form.errors.items())
        context = _detail_context(request, alert, forms={action: form}, error=f"Not saved. {errors}")
        return render(request, "alerts/detail.html", context, status=400)
    data = form.cleaned_data
    try:
        if action == "acknowledge":
            alert_acknowledge(alert=alert, user=request.user)
        elif action == "resolve":
            alert_resolve(alert=alert, user=request.user, note=data.get("note", ""))
        elif action == "dismiss":
            alert_dismiss(alert=alert, user=request.user, reason=data["reason"], note=data.get("note", ""))
        else:
            alert_mark_expected(
                alert=alert, user=request.user, scope=data["scope"], note=data.get("note", "")
            )
    except AlertTransitionError as exc:
        alert.refresh_from_db()
        context = _detail_context(request, alert, error=f"Not changed: {exc}")
        return render(request, "alerts/detail.html", context, status=409)
    messages.success(request, f"Alert {alert.pk}: {_DONE[action]}")
    return HttpResponseRedirect(_next_url(request, reverse("alerts:detail", args=[alert.pk])))
