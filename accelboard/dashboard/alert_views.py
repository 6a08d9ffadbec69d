"""Alert pages: the list (filters, counts by state, false-positive rates, bulk and per-row
triage), one alert's page (series chart, evidence, run/commit range, history, triage forms), and
the triage POSTs.

Thin: each view takes the caller's scope (``core.access``), parses input with a form or the
filter set, calls page selectors (reads) or the alert services (writes), and renders. Who may do
what (the rules are ``core.access``'s):

1. Anyone who may see the alert's team (members, finance included; staff) may view it; an alert
   of another team is a 404, so ids reveal nothing.
2. Leads and engineers of the alert's team, and staff, may triage. Finance may look but not
   triage (403 with a reason).
3. A transition the state machine refuses (dismissing a resolved alert, acknowledging twice) is
   a 409 with the reason on the page; a bad form value a 400 naming the field; never a 500. A
   bulk action is all-or-nothing: one refused alert rolls the others back.

In ``dashboard`` because an alert's page shows the profiles app's comparison of its two runs'
GPU profiles (when both have one) beside the alerts app's evidence.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from accelboard.alerts import charts, page_selectors, signal_selectors
from accelboard.alerts.choices import AlertKind, AlertState
from accelboard.alerts.detection import own_spread_after
from accelboard.alerts.models import Alert
from accelboard.alerts.selectors import alert_feedback_stats
from accelboard.alerts.services import (
    AlertTransitionError,
    alert_acknowledge,
    alert_dismiss,
    alert_mark_expected,
    alert_resolve,
    alerts_bulk_triage,
)
from accelboard.alerts.severity import SEVERITY_DEFINITION, SIGNAL_SEVERITY_DEFINITION
from accelboard.core.access import Action, request_scope
from accelboard.core.numbers import sig
from accelboard.drift.alert_selectors import drift_alert_signal
from accelboard.importers.metrics import metric_label
from accelboard.profiles.selectors import profile_change_link

from .alert_forms import AcknowledgeForm, BulkTriageForm, DismissForm, ExpectedForm, NoteForm

ALERTS_PER_PAGE = 50
ACTIONS = ("acknowledge", "resolve", "dismiss", "expected")
# Units of the observed/reference figures production rules store (production.py's Finding.value).
PRODUCTION_UNITS: dict[str, str] = {
    AlertKind.SLO: "ms",
    AlertKind.THROUGHPUT: "tokens/s",
    AlertKind.ENERGY: "J/token",
}


def _can_triage(request: HttpRequest, alert: Alert) -> bool:
    return request_scope(request).can(Action.TRIAGE, alert.team_id)


def _visible_alert(request: HttpRequest, pk: int) -> Alert:
    try:
        return page_selectors.alert_get_visible(alert_id=pk, scope=request_scope(request))
    except Alert.DoesNotExist as exc:
        raise Http404("No such alert in your teams") from exc


# --- list ---------------------------------------------------------------------------------------


def _list_context(
    request: HttpRequest, *, bulk_form: BulkTriageForm | None = None
) -> tuple[dict[str, Any], int]:
    scope = request_scope(request)
    params = request.GET
    if request.method == "POST":
        # A refused bulk action shows the list it was posted from, with that list's filters.
        params = QueryDict(urlsplit(_next_url(request, "")).query)
    filterset = page_selectors.alert_filterset(scope=scope, data=params or None)
    status = 200
    context: dict[str, Any] = {
        "form": filterset.form,
        "page": None,
        "filtered": True,
        "bulk_form": bulk_form or BulkTriageForm(),
        "no_team": scope.sees_no_team,
    }
    if not params or filterset.is_valid():
        page = Paginator(filterset.qs, ALERTS_PER_PAGE).get_page(params.get("page"))
        query = params.copy()
        query.pop("page", None)
        state_query = params.copy()
        for key in ("page", "state"):
            state_query.pop(key, None)
        counts = page_selectors.alert_state_counts(filterset=filterset)
        others = page_selectors.alerts_other_metrics(alerts=list(page.object_list))
        context.update(
            page=page,
            rows=[
                {
                    "alert": a,
                    "can_triage": scope.can(Action.TRIAGE, a.team_id),
                    "confidence": _confidence(a.confidence),
                    "other_metrics": others.get(a.pk, []),
                }
                for a in page.object_list
            ],
            severity_definition=SEVERITY_DEFINITION,
            signal_severity_definition=SIGNAL_SEVERITY_DEFINITION,
            filtered=filterset.is_active,
            query=query.urlencode(),
            state_query=state_query.urlencode(),
            state=filterset.form.cleaned_data.get("state") or "" if params else "",
            counts=[(value, label, counts[value]) for value, label in AlertState.choices],
            total=sum(counts.values()),
        )
    else:
        status = 400
    context["any_triage"] = scope.can_anywhere(Action.TRIAGE)
    # The feedback tables cover the alerts the filters pick (every state, as the state counts):
    # one scope for the page's cards and its list, a team filter included.
    valid = not params or filterset.is_valid()
    context["feedback"] = alert_feedback_stats(
        scope=scope, alerts=filterset.qs_without("state") if valid else None
    )
    team_slug = filterset.form.cleaned_data.get("team") if params and valid else ""
    context["feedback_team"] = dict(filterset.filters["team"].extra.get("choices", [])).get(
        team_slug, team_slug
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
    alerts, missing = page_selectors.alerts_get_visible(
        scope=request_scope(request), alert_ids=form.cleaned_data["ids"]
    )
    if missing:
        raise Http404(f"No such alert in your teams: {', '.join(map(str, missing))}")
    refused = [a for a in alerts if not _can_triage(request, a)]
    if refused:
        return _forbidden(request, refused[0])
    action, reason = form.cleaned_data["action"], form.cleaned_data.get("reason") or ""
    try:
        alerts_bulk_triage(alerts=alerts, user=request.user, action=action, reason=reason)
    except AlertTransitionError as exc:
        context, _ = _list_context(request, bulk_form=form)
        context["error"] = f"Nothing was changed. {exc}"
        return render(request, "alerts/list.html", context, status=409)
    verb = "acknowledged" if action == "acknowledge" else "dismissed"
    messages.success(request, f"{len(alerts)} alert{'s' if len(alerts) != 1 else ''} {verb}.")
    return HttpResponseRedirect(_next_url(request, reverse("alerts:list")))


# --- detail -------------------------------------------------------------------------------------


def _chart(alert: Alert, marks: list[Any]) -> tuple[dict[str, Any] | None, int]:
    """The series figure and how many points it shows (None without a series or points).

    The other level changes it marks are the ones the detector stored with the alert
    (``detail["change_runs"]``), not a new run of the detector: the page shows the evidence the
    alert was raised on, and an alert stored without them is drawn without them."""
    series = alert.series
    if series is None or alert.kind == AlertKind.DRIFT:  # drift draws its loss instead (signal view)
        return None, 0
    points = page_selectors.alert_series_points(alert=alert)
    if len(points) < 2:
        return None, len(points)
    change_at = alert.first_run.started_at if alert.first_run else None
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    stored = detail.get("change_runs")
    change_runs = {r for r in stored if isinstance(r, int)} if isinstance(stored, list) else set()
    found = [p["measured_at"] for p in points if p["run_id"] in change_runs]
    history = [moment for moment in found if moment != change_at]
    before, after = page_selectors.alert_chart_levels(
        alert=alert, points=points, marks_at=[m.run.started_at for m in marks]
    )
    figure = charts.alert_series_figure(
        points=points,
        label=metric_label(series.metric),
        unit=series.unit,
        direction=series.direction,
        change_at=change_at,
        before=before,
        after=after,
        history_changes=history,
        expected=[{"at": m.run.started_at, "text": m.note or m.get_scope_display()} for m in marks],
        run_ids=[r for r in (alert.last_good_run_id, alert.first_run_id) if r],
    )
    return figure, len(points)


def _after_spread(alert: Alert) -> float | None:
    """The after level's own spread; None while it rests on too few results to have one."""
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    return own_spread_after(alert.after_spread, detail.get("results_after"))


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
        # "throughput −8%: flash_fwd_kernel +23%" when both runs have a profile.
        "profile_change": profile_change_link(
            run_a_id=alert.last_good_run_id, run_b_id=alert.first_run_id, scope=request_scope(request)
        ),
        "events": page_selectors.alert_events(alert=alert),
        "metric_rows": page_selectors.alert_metric_rows(alert=alert),
        "severity_definition": SEVERITY_DEFINITION,
        "signal_severity_definition": SIGNAL_SEVERITY_DEFINITION,
        "marks": marks,
        "evidence": _evidence(detail),
        "signal": drift_alert_signal(alert=alert)
        if alert.kind == AlertKind.DRIFT
        else signal_selectors.alert_signal_view(alert=alert),
        "unit": alert.series.unit
        if alert.series
        else str(detail.get("unit") or PRODUCTION_UNITS.get(alert.kind, "")),
        "reason": str(detail.get("reason", "")),
        "after_spread": _after_spread(alert),
        "results_after": detail.get("results_after")
        if isinstance(detail.get("results_after"), int)
        else None,
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


# Stored for the chart (the run ids of the other level changes), not evidence to read as text.
_CHART_ONLY = {"change_runs"}


def _evidence(detail: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The detector's detail JSON as (key, text, is_block) rows: scalars inline, structures as
    indented JSON, so a production alert's evidence (window, samples, limits) reads as written.
    Unknown keys are shown as they are: the detector may store more than this page knows."""
    rows = []
    for key in sorted((k for k in detail if k not in _CHART_ONLY), key=str):
        value = detail[key]
        if isinstance(value, dict | list):
            rows.append((str(key), json.dumps(value, indent=2, sort_keys=True, default=str), True))
        else:
            text = "—" if value is None else sig(value) if isinstance(value, float) else str(value)
            rows.append((str(key), text, False))
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
