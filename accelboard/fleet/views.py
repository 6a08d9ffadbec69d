"""Views of the fleet app: the live hosts grid and per-host telemetry (page + JSON for refresh).

Thin: parse the range, take the caller's scope (``core.access``), call selectors and charts,
render. A host outside the caller's teams is a 404, not a 403, so host ids of other teams reveal
nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from accelboard.core.access import request_scope

from . import charts, selectors
from .models import Host

# How often the host page asks for fresh figures while it is open (ms); rollups are minute buckets.
REFRESH_MS = 15_000


def _now() -> datetime:
    return timezone.now().astimezone(UTC)


def host_list(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    now = _now()
    grid, live = selectors.fleet_live(scope=scope, now=now)
    context = {
        "grid": grid,
        "now": now,
        "no_team": scope.sees_no_team,
        # The live figures, by the one freshness rule the overview shows them by.
        "live": live,
        "stale_hosts": live["hosts_stale"],
        "gpu_count": live["gpus"],
        # The overview's throttling figures, from the same selector: the two pages agree.
        "throttling": selectors.fleet_throttling(
            scope=scope, now=now, live=[gpu for item in grid for gpu in item["gpus"]]
        ),
        # And its "busy" figures (``fleet_busy``): counted from the Util figures on this page.
        "busy": selectors.fleet_busy(
            scope=scope, now=now, live=[gpu for item in grid for gpu in item["gpus"]]
        ),
    }
    return render(request, "fleet/host_list.html", context)


class BadRange(ValueError):
    pass


def _range(request: HttpRequest) -> str:
    value = request.GET.get("range", selectors.HOST_RANGE_DEFAULT)
    if value not in selectors.HOST_RANGES:
        raise BadRange(f"range: {value!r} is not one of {', '.join(selectors.HOST_RANGES)}")
    return value


def _visible_host(request: HttpRequest, host_id: int) -> Host:
    try:
        return selectors.host_get_visible(host_id=host_id, scope=request_scope(request))
    except Host.DoesNotExist as exc:
        raise Http404("No such host in your teams") from exc


def _telemetry(host: Host, range_key: str, now: datetime, *, stale: bool = False) -> dict[str, Any]:
    """Figures and facts of one host's telemetry over the range ending now. Where the host's data
    starts inside the range (an agent that began reporting minutes ago), the charts start there
    too, so minutes of data are not squeezed against the right edge of hours."""
    start = now - selectors.HOST_RANGES[range_key]
    width, step, frame = selectors.host_telemetry(host_id=host.pk, start=start, end=now)
    health = selectors.host_health_telemetry(host_id=host.pk, start=start, end=now)
    if not frame.empty:
        frame = frame.merge(health, on=["bucket", "accelerator_id"], how="left")
    # Live state by the hosts grid's rule: the agent's interval and its host's staleness.
    interval = selectors.host_interval_s(host=host)
    gpus = [
        selectors.gpu_live_state(accelerator=gpu, now=now, interval_s=interval, host_stale=stale)
        for gpu in selectors.host_accelerators(host=host)
    ]
    shown_from = start
    if not frame.empty:
        first = datetime.fromtimestamp(float(frame["bucket"].min()), UTC)
        # A little room before the first point; never before the range asked for.
        shown_from = max(start, first - (now - first) / 20)
    # The GPUs' DCGM profiling counters over the range (the page's card), where they sent them.
    profiling = charts.profiling_rows(averages=charts.profiling_averages(frame), gpus=gpus)
    figures = charts.host_telemetry_figures(
        frame=frame, gpus=gpus, width_s=width, step_s=step, x_range=[shown_from.isoformat(), now.isoformat()]
    )
    return {
        "range": range_key,
        "has_profiling": bool(profiling),
        "profiling": profiling,
        "width_s": width,
        "step_s": step,
        "label": charts.step_label(width_s=width, step_s=step),
        "points": len(frame),
        "has_data": not frame.empty,
        "last_bucket": datetime.fromtimestamp(frame["bucket"].max(), UTC).isoformat()
        if not frame.empty
        else None,
        "generated_at": now.isoformat(),
        "data_since": shown_from.isoformat() if shown_from > start else None,
        "figures": figures,
        "gpus": gpus,
    }


def host_detail(request: HttpRequest, host_id: int) -> HttpResponse:
    host = _visible_host(request, host_id)
    try:
        range_key = _range(request)
    except BadRange as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    now = _now()
    interval = selectors.host_interval_s(host=host)
    stale = selectors.agent_is_stale(last_seen_at=host.last_seen_at, now=now, interval_s=interval)
    telemetry = _telemetry(host, range_key, now, stale=stale)
    start = now - selectors.HOST_RANGES[range_key]
    # Charts of a signal the host never sent in the range (DCGM profiling) are left out.
    keys = [key for key in charts.CHARTS if key not in charts.OPTIONAL_CHARTS or telemetry["has_profiling"]]
    context = {
        # Who held each GPU over the same range: fleet's own intervals (fleet sits below
        # attribution, so no cost here; the workload pages it links to carry the money).
        "holders": selectors.host_gpu_holders(host=host, start=start, end=now),
        "host": host,
        "telemetry": telemetry,
        "figures": telemetry["figures"],
        "chart_keys": keys,
        "chart_figures": [(f"{key}-figure", telemetry["figures"][key]) for key in keys],
        "profiling_labels": list(charts.PROFILING_LABELS.values()),
        "profiling": telemetry["profiling"],
        "ranges": list(selectors.HOST_RANGES),
        "stale": stale,
        "stale_after": selectors.stale_after(interval_s=interval),
        "now": now,
        "refresh_url": reverse("fleet:host_telemetry", args=[host.pk]) + f"?range={range_key}",
        "refresh_ms": REFRESH_MS,
        "refresh_s": REFRESH_MS // 1000,
    }
    return render(request, "fleet/host_detail.html", context)


def host_telemetry_json(request: HttpRequest, host_id: int) -> JsonResponse:
    """The host page's figures as JSON: the page fetches this every ``REFRESH_MS`` and redraws."""
    host = _visible_host(request, host_id)
    try:
        range_key = _range(request)
    except BadRange as exc:
        return JsonResponse({"error": str(exc), "field": "range"}, status=400)
    now = _now()
    interval = selectors.host_interval_s(host=host)
    stale = selectors.agent_is_stale(last_seen_at=host.last_seen_at, now=now, interval_s=interval)
    telemetry = _telemetry(host, range_key, now, stale=stale)
    del telemetry["gpus"], telemetry["profiling"]
    return JsonResponse(telemetry)
