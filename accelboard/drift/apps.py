from __future__ import annotations

from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "accelboard.drift"
    label = "drift"
    verbose_name = "Quantization drift"
