from __future__ import annotations

from django.urls import path

from . import views

app_name = "benchmarks"

urlpatterns = [
    path("", views.run_list, name="run_list"),
]
