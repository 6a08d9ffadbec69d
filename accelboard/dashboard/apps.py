from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "accelboard.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
