"""The runs pages (``/runs/``), under their original URL namespace ``benchmarks``."""

from __future__ import annotations

from django.urls import path

from . import run_views as views

app_name = "benchmarks"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("upload/", views.upload, name="upload"),
    path("upload/preview/", views.upload_preview, name="upload_preview"),
    path("upload/save/", views.upload_save_view, name="upload_save"),
    path("compare/", views.compare, name="compare"),
    path("<int:run_id>/", views.run_detail, name="run_detail"),
    path("<int:run_id>/raw", views.run_raw, name="run_raw"),
    path("<int:run_id>/compare-baseline/", views.run_compare_baseline, name="compare_baseline"),
]
