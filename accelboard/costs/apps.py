from __future__ import annotations

from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "accelboard.costs"
    label = "costs"
    verbose_name = "Costs and energy"
