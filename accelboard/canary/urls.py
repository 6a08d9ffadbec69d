from __future__ import annotations

from django.urls import path

from . import views

app_name = "canary"

urlpatterns = [
    path("", views.canary_list, name="list"),
    path("new/", views.canary_form, name="new"),
    path("<int:check_id>/", views.canary_detail, name="detail"),
    path("<int:check_id>/edit/", views.canary_form, name="edit"),
]
