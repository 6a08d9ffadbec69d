from __future__ import annotations

from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "accelboard.serving"
    label = "serving"
    verbose_name = "Production inference"
