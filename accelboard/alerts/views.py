"""Views of the alerts app. Alert list, triage and detail."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accelboard.dashboard.views import planned


def alert_list(request: HttpRequest) -> HttpResponse:
    return planned(request, area="alerts")
