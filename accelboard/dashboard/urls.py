from __future__ import annotations

from django.urls import path

from . import hardware_views, views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("trends/", views.trends, name="trends"),
    path("hardware/", hardware_views.hardware, name="hardware"),
]
