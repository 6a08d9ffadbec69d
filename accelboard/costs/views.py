"""Views of the costs app. Finance pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accelboard.dashboard.views import planned


def cost_report(request: HttpRequest) -> HttpResponse:
    return planned(request, area="costs")
