"""The workload pages (``workload_views``), apart from the costs-by-workload page under ``/costs/``."""

from __future__ import annotations

from django.urls import path

from . import workload_views

app_name = "workloads"

urlpatterns = [
    path("", workload_views.workload_list, name="list"),
    path("<int:workload_id>/", workload_views.workload_detail, name="detail"),
]
