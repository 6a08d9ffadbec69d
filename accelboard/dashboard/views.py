"""The overview and trends pages. Thin: take the caller's scope, call selectors, render."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from accelboard.benchmarks.models import Series
from accelboard.core.access import request_scope
from accelboard.core.selectors import membership_list_of

from . import charts, selectors, trends_charts, trends_selectors

# How far back the overview's charts look: telemetry two weeks, spend a month.
OVERVIEW_DAYS = 14
OVERVIEW_SPEND_DAYS = 30


def overview(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    now = timezone.now()
    today = now.astimezone(UTC).date()
    frame = selectors.overview_fleet_frame(scope=scope, days=OVERVIEW_DAYS, now=now)
    spend = selectors.overview_spend_days(scope=scope, today=today, days=OVERVIEW_SPEND_DAYS)
    # The live figures ("now", "reporting"): the hosts page's, by its one freshness rule.
    live_gpus, live = selectors.overview_live(scope=scope, now=now)
    context = {
        "summary": selectors.overview_summary(scope=scope, now=now, live=live),
        "live": live,
        "periods": selectors.overview_periods(scope=scope, today=today),
        "movers": selectors.overview_movers(scope=scope, now=now),
        "saturation": selectors.overview_saturation(scope=scope, now=now, live=live_gpus),
        "window_days": OVERVIEW_DAYS,
        "spend_days": OVERVIEW_SPEND_DAYS,
        # A user in no team sees nothing; telling them how to install an agent would mislead.
        "no_team": scope.sees_no_team,
        # Which teams and roles the page covers (single sign-on users see what their groups gave).
        "my_memberships": membership_list_of(user=request.user),
        "costs_every_team": scope.costs_teams_wider(),
        "has_telemetry": not frame.empty,
        "has_spend": bool(spend["series"]),
        "utilisation_figure": charts.fleet_utilisation_figure(frame),
        "energy_figure": charts.fleet_energy_figure(frame),
        "spend_figure": charts.spend_days_figure(spend),
    }
    return render(request, "dashboard/overview.html", context)


class BadParameter(ValueError):
    """A query parameter that cannot be read: a 400 naming it."""


def _series_ids(request: HttpRequest) -> list[int]:
    ids: list[int] = []
    for raw in request.GET.getlist("series"):
        for part in raw.split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or int(part) <= 0:
                raise BadParameter(f"series: {part!r} is not a series id (a positive whole number)")
            if int(part) not in ids:
                ids.append(int(part))
    if len(ids) > trends_selectors.MAX_SERIES:
        raise BadParameter(
            f"series: at most {trends_selectors.MAX_SERIES} series on one chart, got {len(ids)}"
        )
    return ids


def _moment(request: HttpRequest, name: str) -> str | None:
    """An ISO date or date-time (``2026-01-31`` or ``2026-01-31T12:00``) kept as written, or None."""
    value = request.GET.get(name, "").strip()
    if not value:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadParameter(f"{name}: {value!r} is not an ISO date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from exc
    return value


def _view_params(request: HttpRequest) -> dict[str, Any]:
    scale = request.GET.get("scale", "")
    if scale not in trends_charts.SCALES:
        raise BadParameter(
            f"scale: {scale!r} is not one of {', '.join(s for s in trends_charts.SCALES if s)}"
        )
    start, end = _moment(request, "from"), _moment(request, "to")
    if start and end and _aware(start) >= _aware(end):
        raise BadParameter("to: must be after from")
    return {"series": _series_ids(request), "scale": scale, "from": start, "to": end}


def _aware(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def trends_url(
    *, series_ids: list[int], scale: str = "", start: str | None = None, end: str | None = None
) -> str:
    """The shareable address of a trends view: series in order, then scale and zoom if set."""
    query: list[tuple[str, Any]] = [("series", pk) for pk in series_ids]
    if scale:
        query.append(("scale", scale))
    if start:
        query.append(("from", start))
    if end:
        query.append(("to", end))
    return reverse("dashboard:trends") + (f"?{urlencode(query)}" if query else "")


def _alert_url(alert_id: int) -> str:
    try:
        return reverse("alerts:detail", args=[alert_id])
    except NoReverseMatch:  # the alert page is another app's; until it exists, the list
        return reverse("alerts:list") + f"#alert-{alert_id}"


def _position(run_ids: list[int], run_id: object) -> int | None:
    return run_ids.index(run_id) if isinstance(run_id, int) and run_id in run_ids else None


def _trend_input(history: trends_selectors.SeriesHistory) -> trends_charts.TrendInput:
    alerts = [
        {
            **alert,
            "url": _alert_url(alert["id"]),
            "index": trends_charts.alert_index(alert=alert, run_ids=history.run_ids, times=history.times),
            # Where its change begins and (after a revert) ends on the chart: the baseline's bounds.
            "first_index": _position(history.run_ids, alert.get("first_run_id")),
            "reverted_index": _position(history.run_ids, alert.get("reverted_at_run")),
        }
        for alert in history.alerts
    ]
    history.alerts = alerts
    return trends_charts.TrendInput(
        label=history.label,
        unit=history.unit,
        direction=history.direction,
        times=history.times,
        values=history.values,
        commits=history.commits,
        alerts=alerts,
        expected=history.expected,
        min_effect=history.min_effect,
    )


def trends(request: HttpRequest) -> HttpResponse:
    """Series over time. Picking filters redirects to the canonical ``?series=..`` address."""
    scope = request_scope(request)
    try:
        params = _view_params(request)
    except BadParameter as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    filters = trends_selectors.Filters(
        **{name: request.GET.get(name, "").strip() for name in ("model", "variant", "hardware", "metric")}
    )
    no_match = None
    if filters.any():
        found, matched = trends_selectors.series_find(scope=scope, filters=filters)
        if found:
            keep = params["series"] if request.GET.get("add") else []
            merged = list(dict.fromkeys([*keep, *found]))[: trends_selectors.MAX_SERIES]
            return redirect(
                trends_url(series_ids=merged, scale=params["scale"], start=params["from"], end=params["to"])
            )
        no_match = filters
    try:
        histories = trends_selectors.series_histories(series_ids=params["series"], scope=scope)
    except Series.DoesNotExist as exc:
        raise Http404("No such series in your teams") from exc
    figure: dict[str, Any] | None = None
    summaries: list[dict[str, Any]] = []
    if histories:
        x_range = [params["from"], params["to"]] if params["from"] and params["to"] else None
        figure, summaries = trends_charts.trend_figure(
            inputs=[_trend_input(h) for h in histories], scale=params["scale"], x_range=x_range
        )
    context = {
        "choices": trends_selectors.trend_choices(scope=scope),
        # With series open and nothing picked, the pickers say what the open series are.
        "filters": filters
        if filters.any() or not histories
        else trends_selectors.filters_of_series(histories=histories),
        "no_match": no_match,
        "histories": histories,
        "rows": list(zip(histories, summaries, strict=True)),
        "figure": figure,
        "has_points": any(h.values for h in histories),
        "params": params,
        "scale_used": figure["layout"]["meta"]["scale"] if figure else "",
        "scales": [s for s in trends_charts.SCALES if s],
        "share_url": request.build_absolute_uri(
            trends_url(
                series_ids=params["series"], scale=params["scale"], start=params["from"], end=params["to"]
            )
        ),
        "max_series": trends_selectors.MAX_SERIES,
        "no_team": scope.sees_no_team,
    }
    return render(request, "dashboard/trends.html", context)
