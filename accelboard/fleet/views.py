"""Views of the fleet app. The hosts grid and per-host telemetry."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accelboard.dashboard.views import planned


def host_list(request: HttpRequest) -> HttpResponse:
    return planned(request, area="hosts")
