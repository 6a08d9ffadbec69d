from __future__ import annotations

from django.urls import path

from . import views

app_name = "costs"

urlpatterns = [
    path("", views.cost_report_page, name="report"),
    path("drill/", views.cost_drill_page, name="drill"),
]
