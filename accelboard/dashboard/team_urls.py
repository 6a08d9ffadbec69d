"""The team pages (``/teams/``), under their original URL namespace ``core``."""

from __future__ import annotations

from django.urls import path

from . import team_views as views

app_name = "core"

urlpatterns = [
    path("", views.team_list, name="team_list"),
    path("<slug:slug>/", views.team_detail, name="team_detail"),
]
