"""Dashboard pages. Thin: pick the teams the user may see, call selectors, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accelboard.core.selectors import team_ids_visible

from . import charts, selectors


def _team_scope(request: HttpRequest) -> list[int] | None:
    """None means every team (staff); otherwise the ids of the user's teams."""
    if request.user.is_staff:
        return None
    return team_ids_visible(user=request.user)


# How far back the overview's charts look.
OVERVIEW_DAYS = 14


def overview(request: HttpRequest) -> HttpResponse:
    team_ids = _team_scope(request)
    frame = selectors.overview_fleet_frame(team_ids=team_ids, days=OVERVIEW_DAYS)
    context = {
        "summary": selectors.overview_summary(team_ids=team_ids),
        "window_days": OVERVIEW_DAYS,
        # A user in no team sees nothing; telling them how to install an agent would mislead.
        "no_team": team_ids == [],
        "has_telemetry": not frame.empty,
        "utilisation_figure": charts.fleet_utilisation_figure(frame),
        "energy_figure": charts.fleet_energy_figure(frame),
    }
    return render(request, "dashboard/overview.html", context)


# Areas whose pages later work fills; each says what it will show rather than pretending.
PLANNED = {
    "trends": (
        "Trends",
        "Any series over time, with change points, alerts, baseline bands and expected-change annotations; "
        "several series on one chart; shareable URLs.",
    ),
    "hardware": (
        "Hardware comparison",
        "For one workload, every accelerator it ran on side by side: throughput, p50/p99 latency, throughput per "
        "watt, energy and cost per 1M inferences, and a recommendation for a latency target.",
    ),
    "drift": (
        "Quantization drift",
        "Per model, what each precision buys in speed and cost and what it costs in accuracy, over time.",
    ),
    "costs": (
        "Costs",
        "Monthly spend by team, project, model, accelerator type and provider, with drill-down and exports.",
    ),
    "alerts": (
        "Alerts",
        "Regression, drift and production alerts with triage: acknowledge, dismiss, mark expected.",
    ),
    "hosts": ("Hosts", "The fleet as a live grid of hosts and GPUs, and per-host telemetry from rollups."),
}


def trends(request: HttpRequest) -> HttpResponse:
    return planned(request, area="trends")


def planned(request: HttpRequest, area: str) -> HttpResponse:
    title, description = PLANNED[area]
    return render(
        request, "dashboard/planned.html", {"title": title, "description": description, "area": area}
    )
