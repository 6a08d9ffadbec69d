from __future__ import annotations

from django.urls import path

from . import allocation_views

app_name = "allocation"

urlpatterns = [
    path("", allocation_views.allocation_page, name="page"),
]
