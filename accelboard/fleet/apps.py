from __future__ import annotations

from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "accelboard.fleet"
    label = "fleet"
    verbose_name = "Fleet and telemetry"
