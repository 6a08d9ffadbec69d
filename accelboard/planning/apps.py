from __future__ import annotations

from django.apps import AppConfig


class PlanningConfig(AppConfig):
    name = "accelboard.planning"
    label = "planning"
    verbose_name = "Capacity and cost planning"
