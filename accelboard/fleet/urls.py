from __future__ import annotations

from django.urls import path

from . import views

app_name = "fleet"

urlpatterns = [
    path("", views.host_list, name="hosts"),
    path("<int:host_id>/", views.host_detail, name="host_detail"),
    path("<int:host_id>/telemetry.json", views.host_telemetry_json, name="host_telemetry"),
]
