from __future__ import annotations

from django.urls import path

from . import views

app_name = "drift"

urlpatterns = [
    path("", views.drift_overview, name="overview"),
    path("<int:model_id>/", views.drift_model, name="model"),
]
