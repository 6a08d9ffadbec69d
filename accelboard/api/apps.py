from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "accelboard.api"
    label = "api"
    verbose_name = "API tokens and ingest batches"
