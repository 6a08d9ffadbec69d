from __future__ import annotations

from django.apps import AppConfig


class CanaryConfig(AppConfig):
    name = "accelboard.canary"
    label = "canary"
    verbose_name = "Canary verdicts"
