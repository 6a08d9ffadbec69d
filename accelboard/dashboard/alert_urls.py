"""The alert pages (``/alerts/``), under their original URL namespace ``alerts``."""

from __future__ import annotations

from django.urls import path

from . import alert_views as views

app_name = "alerts"

urlpatterns = [
    path("", views.alert_list, name="list"),
    path("triage/", views.alert_bulk_triage, name="bulk_triage"),
    path("<int:pk>/", views.alert_detail, name="detail"),
    path("<int:pk>/<slug:action>/", views.alert_triage, name="triage"),
]
