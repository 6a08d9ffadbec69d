from __future__ import annotations

from django.urls import path

from . import views

app_name = "planning"

urlpatterns = [
    path("", views.plan, name="plan"),
    path("scenarios/", views.scenario_save, name="scenario_save"),
    path("scenarios/<int:scenario_id>/", views.scenario, name="scenario"),
    path("scenarios/<int:scenario_id>/delete/", views.scenario_delete, name="scenario_delete"),
]
