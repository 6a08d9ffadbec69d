from __future__ import annotations

from django.apps import AppConfig


class AttributionConfig(AppConfig):
    name = "accelboard.attribution"
    label = "attribution"
    verbose_name = "Workload attribution"
