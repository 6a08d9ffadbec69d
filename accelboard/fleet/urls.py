from __future__ import annotations

from django.urls import path

from . import views

app_name = "fleet"

urlpatterns = [
    path("", views.host_list, name="hosts"),
]
