from __future__ import annotations

from django.urls import path

from . import views

app_name = "profiles"

urlpatterns = [
    path("profiles/compare/", views.profile_compare, name="compare"),
    path("<int:run_id>/profile/", views.run_profile, name="run_profile"),
    path("<int:run_id>/profile/attach/", views.run_profile_attach, name="attach"),
]
