"""Views of the drift app. Quantization drift pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accelboard.dashboard.views import planned


def drift_overview(request: HttpRequest) -> HttpResponse:
    return planned(request, area="drift")
