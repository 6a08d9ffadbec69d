from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accelboard.core.selectors import team_ids_visible

from . import selectors


def run_list(request: HttpRequest) -> HttpResponse:
    team_ids = None if request.user.is_staff else team_ids_visible(user=request.user)
    page = Paginator(selectors.run_list(team_ids=team_ids), 50).get_page(request.GET.get("page"))
    return render(request, "benchmarks/run_list.html", {"page": page})
