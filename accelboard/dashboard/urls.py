from __future__ import annotations

from django.urls import path

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("trends/", views.planned, {"area": "trends"}, name="trends"),
    path("hardware/", views.planned, {"area": "hardware"}, name="hardware"),
    path("quantization/", views.planned, {"area": "drift"}, name="drift"),
    path("costs/", views.planned, {"area": "costs"}, name="costs"),
    path("alerts/", views.planned, {"area": "alerts"}, name="alerts"),
    path("hosts/", views.planned, {"area": "hosts"}, name="hosts"),
]
