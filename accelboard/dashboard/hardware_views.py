"""The hardware comparison page and its recommendation form."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from .views import planned


def hardware(request: HttpRequest) -> HttpResponse:
    return planned(request, area="hardware")
